package assemble

import (
	"bytes"
	"encoding/json"
	"strconv"
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
	n := 2
	for _, k := range o.keys {
		n += len(k) + 4 + len(o.vals[k]) // quotes, colon, comma
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, k := range o.keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, quote(k)...)
		b = append(b, ':')
		b = append(b, o.vals[k]...)
	}
	return append(b, '}')
}

func isNull(raw []byte) bool { return string(bytes.TrimSpace(raw)) == "null" }

var nullJSON = []byte("null")

// quote encodes s as a JSON string.
func quote(s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

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

func intsJSON(ids []int32) []byte {
	b := make([]byte, 0, 8*len(ids)+2)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	return append(b, ']')
}
