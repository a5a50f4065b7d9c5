package assemble

import (
	"slices"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzAppendIDs: the plain-integer fast path appends exactly what reading
// each element as a value does, and says so as often.
func FuzzAppendIDs(f *testing.F) {
	for _, s := range []string{"[]", "[1,2,3]", " [ 0 , 151644 ] ", "[2147483647]", "[2147483648]", "[-1]", "[1.0]",
		"[1e3]", "[01]", "[1 2]", `["1"]`, "[1,]", "[1,2", "[99999999999999999999]", "[0,0]", "[3]x"} {
		f.Add([]byte(s), uint8(2))
	}
	f.Fuzz(func(t *testing.T, b []byte, pre uint8) {
		v := valOf(b)
		if !v.IsArray() || !gjson.ValidBytes(b) {
			return // the assembler reads ids only from chunks it found valid
		}
		prefix := make([]int32, int(pre)%4, 8)
		got, gn, gok := appendIDs(slices.Clone(prefix), v)
		want, wn, wok := appendIDsSlow(slices.Clone(prefix), v)
		if gok != wok || gn != wn || !slices.Equal(got, want) {
			t.Fatalf("appendIDs(%q) = %v, %d, %v; each element read as a value gives %v, %d, %v", b, got, gn, gok, want, wn, wok)
		}
	})
}

// TestAppendIDsInvalid: an array that is not JSON ends the walk (it used to
// loop forever on a byte that starts no value).
func TestAppendIDsInvalid(t *testing.T) {
	for _, s := range []string{"[A", "[1,A]", "[1 A", "[}"} {
		if ids, n, ok := appendIDs(nil, valOf([]byte(s))); ok || n != 0 || len(ids) != 0 {
			t.Errorf("appendIDs(%q) = %v, %d, %v; want nothing", s, ids, n, ok)
		}
	}
}

// BenchmarkAppendIDs reads a prompt's 4,000 token ids, as a vLLM stream's
// first chunk carries them.
func BenchmarkAppendIDs(b *testing.B) {
	raw := []byte{'['}
	for i := range 4000 {
		if i > 0 {
			raw = append(raw, ',')
		}
		raw = strconv.AppendInt(raw, int64(i*37%151936), 10)
	}
	raw = append(raw, ']')
	v := valOf(raw)
	b.SetBytes(int64(len(raw)))
	for _, bc := range []struct {
		name string
		fn   func([]int32, val) ([]int32, int, bool)
	}{{"fast", appendIDs}, {"each-value", appendIDsSlow}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, n, ok := bc.fn(nil, v); !ok || n != 4000 {
					b.Fatal(n, ok)
				}
			}
		})
	}
}
