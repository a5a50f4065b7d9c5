package assemble

import (
	"bytes"
	"slices"

	"github.com/orchard-rl/orchard/internal/jsonout"
)

// object is a JSON object under construction whose keys keep the order in
// which they were first set, so assembled responses read like the chunks
// they came from and unknown fields survive untouched.
type object struct {
	keys []string
	vals map[string][]byte
}

// set stores raw JSON for k, keeping k's position if it was set before.
func (o *object) set(k string, raw []byte) {
	if o.vals == nil {
		o.vals = make(map[string][]byte)
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = raw
}

// put is set, without the map write when k already holds an equal value.
func (o *object) put(k string, raw []byte) {
	if old, ok := o.vals[k]; ok && bytes.Equal(old, raw) {
		return
	}
	o.set(k, raw)
}

// mergeRaw is merge for a key and value that alias a chunk: it copies them
// only when it stores them, which for most fields of most chunks it does not.
func (o *object) mergeRaw(k val, raw []byte) {
	var old []byte
	var ok bool
	if k.plain() {
		old, ok = o.vals[string(k.raw[1:len(k.raw)-1])]
	} else {
		old, ok = o.vals[k.String()]
	}
	if ok && (isNull(raw) || bytes.Equal(old, raw)) {
		return
	}
	o.set(k.String(), bytes.Clone(raw))
}

// del removes k.
func (o *object) del(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	o.keys = slices.DeleteFunc(o.keys, func(s string) bool { return s == k })
}

func (o *object) get(k string) ([]byte, bool) {
	v, ok := o.vals[k]
	return v, ok
}

func (o *object) has(k string) bool {
	_, ok := o.vals[k]
	return ok
}

// bytes renders the object as compact JSON.
func (o *object) bytes() []byte {
	return o.appendTo(make([]byte, 0, o.size()), nil)
}

// size is the length of o rendered, for keys that need no escaping.
func (o *object) size() int {
	n := 2
	for _, k := range o.keys {
		n += len(k) + 4 + len(o.vals[k]) // quotes, colon, comma
	}
	return n
}

// appendTo appends o rendered as compact JSON to b. For each key, value
// (when not nil) may append the key's value itself and report true; keys it
// declines get their stored value. Nested values are thus written once,
// into the final buffer, instead of rendered and copied at each level.
func (o *object) appendTo(b []byte, value func(b []byte, k string) ([]byte, bool)) []byte {
	b = append(b, '{')
	for i, k := range o.keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendKey(b, k)
		b = append(b, ':')
		if value != nil {
			if nb, ok := value(b, k); ok {
				b = nb
				continue
			}
		}
		b = append(b, o.vals[k]...)
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
