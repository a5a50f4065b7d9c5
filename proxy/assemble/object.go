package assemble

import (
	"bytes"
	"slices"
	"strings"
	"unsafe"

	"github.com/orchard-rl/orchard/internal/jsonout"
)

// object is a JSON object under construction whose keys keep the order in
// which they were first set, so assembled responses read like the chunks
// they came from and unknown fields survive untouched. Its keys are
// searched in order (a chunk's objects have a handful, and every chunk
// looks them up); past smallObject keys a map indexes them, so that an
// object with thousands costs no quadratic time.
type object struct {
	members []member
	index   map[string]int // key to position, once there are many
}

// member is a key of an object and its raw JSON.
type member struct {
	k string
	v []byte
}

// smallObject is the most keys an object searches without its index.
const smallObject = 16

// objectRoom is the room an object gets with its first key: chunks' objects
// have a handful, which then cost one allocation.
const objectRoom = 8

// find returns the position of k, or -1.
func (o *object) find(k string) int {
	if o.index != nil {
		if i, ok := o.index[k]; ok {
			return i
		}
		return -1
	}
	for i := range o.members {
		if o.members[i].k == k {
			return i
		}
	}
	return -1
}

// set stores raw JSON for k, keeping k's position if it was set before.
func (o *object) set(k string, raw []byte) {
	if i := o.find(k); i >= 0 {
		o.members[i].v = raw
		return
	}
	if o.members == nil {
		o.members = make([]member, 0, objectRoom)
	}
	o.members = append(o.members, member{k, raw})
	switch {
	case o.index != nil:
		o.index[k] = len(o.members) - 1
	case len(o.members) > smallObject:
		o.index = make(map[string]int, 2*len(o.members))
		for i, m := range o.members {
			o.index[m.k] = i
		}
	}
}

// put is set, without a copy of the stored value when k already holds an
// equal value.
func (o *object) put(k string, raw []byte) {
	if i := o.find(k); i >= 0 && bytes.Equal(o.members[i].v, raw) {
		return
	}
	o.set(k, raw)
}

// sharedValue is the largest value mergeRaw stores in one allocation with
// its key: the key keeps that allocation alive after the value is
// replaced, which must not hold on to a large one.
const sharedValue = 256

// mergeRaw is merge for a key and value that alias a chunk: it copies them
// only when it stores them, which for most fields of most chunks it does
// not. A new member's key and small value share one allocation.
func (o *object) mergeRaw(k val, raw []byte) {
	// k.text aliases the chunk: find only compares it; what is stored is
	// copied.
	key := k.text()
	i := o.find(key)
	switch {
	case i >= 0 && (isNull(raw) || bytes.Equal(o.members[i].v, raw)):
	case i >= 0:
		o.members[i].v = bytes.Clone(raw)
	case len(raw) > sharedValue:
		o.set(strings.Clone(key), bytes.Clone(raw))
	default:
		buf := make([]byte, len(key)+len(raw))
		copy(buf, key)
		copy(buf[len(key):], raw)
		// The key's bytes are never written again, and the value's
		// capacity ends where it does, so an append to it reallocates.
		o.set(unsafe.String(unsafe.SliceData(buf), len(key)), buf[len(key):len(buf):len(buf)])
	}
}

// del removes k.
func (o *object) del(k string) {
	i := o.find(k)
	if i < 0 {
		return
	}
	o.members = slices.Delete(o.members, i, i+1)
	if o.index != nil {
		delete(o.index, k)
		for j := i; j < len(o.members); j++ {
			o.index[o.members[j].k] = j
		}
	}
}

func (o *object) get(k string) ([]byte, bool) {
	if i := o.find(k); i >= 0 {
		return o.members[i].v, true
	}
	return nil, false
}

func (o *object) has(k string) bool { return o.find(k) >= 0 }

// bytes renders the object as compact JSON.
func (o *object) bytes() []byte {
	return o.appendTo(make([]byte, 0, o.size()), nil)
}

// size is the length of o rendered, for keys that need no escaping.
func (o *object) size() int {
	n := 2
	for _, m := range o.members {
		n += len(m.k) + 4 + len(m.v) // quotes, colon, comma
	}
	return n
}

// appendTo appends o rendered as compact JSON to b. For each key, value
// (when not nil) may append the key's value itself and report true; keys it
// declines get their stored value. Nested values are thus written once,
// into the final buffer, instead of rendered and copied at each level.
func (o *object) appendTo(b []byte, value func(b []byte, k string) ([]byte, bool)) []byte {
	b = append(b, '{')
	for i, m := range o.members {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendKey(b, m.k)
		b = append(b, ':')
		if value != nil {
			if nb, ok := value(b, m.k); ok {
				b = nb
				continue
			}
		}
		b = append(b, m.v...)
	}
	return append(b, '}')
}

// appendKey appends k as a JSON string.
func appendKey(b []byte, k string) []byte { return jsonout.String(b, k) }

func isNull(raw []byte) bool { return string(bytes.TrimSpace(raw)) == "null" }

var nullJSON = []byte("null")

// quote encodes s as a JSON string.
func quote[S []byte | string](s S) []byte { return jsonout.String(make([]byte, 0, len(s)+2), s) }

// rawArray renders elements (each valid JSON) as a JSON array.
func rawArray(elems [][]byte) []byte {
	n := 2
	for _, e := range elems {
		n += len(e) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, ']')
}
