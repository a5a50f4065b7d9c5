package assemble

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestObjectAsModel runs random sets, puts, merges and deletions on objects
// that grow past smallObject (where an index takes over the search) and
// holds each to a plain model: keys in the order first set, the last value
// of each, and the rendering that follows from them.
func TestObjectAsModel(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		var o object
		var keys []string
		vals := map[string]string{}
		nKeys := 1 + r.IntN(3*smallObject)
		for range 400 {
			k := "k" + strconv.Itoa(r.IntN(nKeys))
			v := strconv.Itoa(r.IntN(3))
			if r.IntN(4) == 0 { // past sharedValue: stored apart from its key
				v = `"` + strings.Repeat(v, sharedValue) + `"`
			}
			switch r.IntN(5) {
			case 0:
				o.del(k)
				if _, ok := vals[k]; ok {
					delete(vals, k)
					keys = slices.DeleteFunc(keys, func(s string) bool { return s == k })
				}
				continue
			case 1:
				// The key and value alias a chunk, which the next read
				// overwrites: what the object keeps must be its own.
				q := quote(k)
				chunk := append(slices.Clip(q), v...)
				o.mergeRaw(val{raw: chunk[:len(q)], Type: gjson.String}, chunk[len(q):])
				for i := range chunk {
					chunk[i] = '#'
				}
			case 2:
				o.put(k, []byte(v))
			default:
				o.set(k, []byte(v))
			}
			if _, ok := vals[k]; !ok {
				keys = append(keys, k)
			}
			vals[k] = v
		}
		want := []byte("{")
		for i, k := range keys {
			if i > 0 {
				want = append(want, ',')
			}
			want = append(want, strconv.Quote(k)+":"+vals[k]...)
			if got, ok := o.get(k); !ok || string(got) != vals[k] {
				t.Fatalf("seed %d: get %s = %q %v, want %q", seed, k, got, ok, vals[k])
			}
		}
		want = append(want, '}')
		if got := o.bytes(); string(got) != string(want) {
			t.Fatalf("seed %d (%d keys): %s, want %s", seed, len(keys), got, want)
		}
		if o.has("absent") {
			t.Fatalf("seed %d: has a key never set", seed)
		}
	}
}
