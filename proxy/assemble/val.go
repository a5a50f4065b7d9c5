package assemble

import (
	"bytes"
	"strconv"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/jsonscan"
)

// val is a JSON value inside a chunk that is already known to be valid. It
// offers the part of gjson.Result that the chat and completions assemblers
// use, with the same results, but walks the chunk's bytes in place: a value
// is scanned only to find its end, keys and values are not copied, and only
// the rare cases (escaped strings, non-integer numbers, values of another
// type than asked for) are handed to gjson. Streams run this for every chunk,
// so it is the proxy's per-event recording cost.
//
// The bytes a val points at belong to the chunk; anything kept must be
// copied.
type val struct {
	raw []byte // the value without surrounding space; nil when missing
	// Type is gjson's type of the value (Null when missing).
	Type gjson.Type
	// pos is the position of an array element, for the keys ForEach yields
	// while walking an array (raw is nil then).
	pos int
}

// valOf returns the value held by raw, which must be valid JSON.
func valOf(raw []byte) val {
	raw = bytes.Trim(raw, " \t\r\n")
	if len(raw) == 0 {
		return val{}
	}
	return val{raw: raw, Type: jsonscan.TypeOf(raw[0])}
}

// IsObject and IsArray report the kind of a JSON container.
func (v val) IsObject() bool { return len(v.raw) > 0 && v.raw[0] == '{' }
func (v val) IsArray() bool  { return len(v.raw) > 0 && v.raw[0] == '[' }

// g is the value as gjson sees it, for the rare cases.
func (v val) g() gjson.Result {
	if v.raw == nil {
		if v.Type == gjson.Number {
			return gjson.Result{Type: gjson.Number, Num: float64(v.pos), Raw: strconv.Itoa(v.pos)}
		}
		return gjson.Result{}
	}
	return gjson.ParseBytes(v.raw)
}

// plain reports whether a string value has no escape sequence, so that its
// text is the bytes between its quotes.
func (v val) plain() bool {
	return v.Type == gjson.String && bytes.IndexByte(v.raw, '\\') < 0
}

// String is gjson.Result.String.
func (v val) String() string {
	if v.plain() {
		return string(v.raw[1 : len(v.raw)-1])
	}
	if v.raw == nil && v.Type == gjson.Number {
		return strconv.Itoa(v.pos)
	}
	return v.g().String()
}

// appendString appends v.String() to dst.
func (v val) appendString(dst []byte) []byte {
	if v.plain() {
		return append(dst, v.raw[1:len(v.raw)-1]...)
	}
	return append(dst, v.String()...)
}

// is reports whether v is the string s (compared unescaped).
func (v val) is(s string) bool { return v.Type == gjson.String && v.text() == s }

// text is v.String() for a string value, without a copy when the string has
// no escapes: the result aliases the chunk, so it is only for comparing (a
// switch on the key) and must never be kept.
func (v val) text() string {
	if v.plain() {
		in := v.raw[1 : len(v.raw)-1]
		if len(in) == 0 {
			return ""
		}
		return unsafe.String(&in[0], len(in))
	}
	return v.String()
}

// Int is gjson.Result.Int.
func (v val) Int() int64 {
	if v.Type == gjson.Number && len(v.raw) > 0 && len(v.raw) <= 18 {
		neg, d := false, v.raw
		if d[0] == '-' {
			neg, d = true, d[1:]
		}
		n, ok := int64(0), len(d) > 0
		for _, c := range d {
			if c < '0' || c > '9' {
				ok = false
				break
			}
			n = n*10 + int64(c-'0')
		}
		if ok {
			if neg {
				return -n
			}
			return n
		}
	}
	if v.raw == nil && v.Type == gjson.Number {
		return int64(v.pos)
	}
	return v.g().Int()
}

// Float is gjson.Result.Float.
func (v val) Float() float64 {
	if v.Type == gjson.Number && v.raw != nil {
		if f, ok := exactFloat(v.raw); ok {
			return f
		}
		f, _ := strconv.ParseFloat(string(v.raw), 64)
		return f
	}
	return v.g().Float()
}

// Get returns the member key of an object (the first, if repeated), or a
// missing value.
func (v val) Get(key string) val {
	var out val
	if !v.IsObject() {
		return out // gjson finds no plain key in anything but an object
	}
	v.ForEach(func(k, e val) bool {
		if k.is(key) {
			out = e
			return false
		}
		return true
	})
	return out
}

// ForEach calls fn for each member of an object (key, value) or element of
// an array (position, value) until fn returns false. Like gjson, it calls fn
// once with a missing key and v itself when v is not a container.
func (v val) ForEach(fn func(k, e val) bool) {
	if v.raw == nil {
		return
	}
	if v.Type != gjson.JSON {
		fn(val{}, v)
		return
	}
	b := v.raw
	obj := b[0] == '{'
	i := 1
	for pos := 0; ; pos++ {
		i = jsonscan.SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = jsonscan.SkipSpace(b, i+1)
		}
		if i >= len(b) || b[i] == '}' || b[i] == ']' {
			return
		}
		k := val{Type: gjson.Number, pos: pos}
		if obj {
			ke := jsonscan.SkipString(b, i)
			k = val{raw: b[i:ke], Type: gjson.String}
			i = jsonscan.SkipSpace(b, ke) + 1 // the colon
			i = jsonscan.SkipSpace(b, i)
		}
		ve := jsonscan.SkipValue(b, i)
		if ve <= i {
			return // not a value: the callers read only valid JSON, but never loop
		}
		if !fn(k, val{raw: b[i:ve], Type: jsonscan.TypeOf(b[i])}) {
			return
		}
		i = ve
	}
}
