// Package jsonscan walks JSON in place for the proxy's per-event work:
// validating a chunk, finding the end of a value, telling value kinds apart.
// It allocates nothing but a Shape's lists of slots, and agrees with gjson
// (a fuzz test holds Valid to gjson.ValidBytes): the callers fall back to
// gjson for anything rare.
package jsonscan

import (
	"bytes"
	"encoding/binary"

	"github.com/tidwall/gjson"
)

// TypeOf returns gjson's type of the value whose first byte is c.
func TypeOf(c byte) gjson.Type {
	switch c {
	case '"':
		return gjson.String
	case '{', '[':
		return gjson.JSON
	case 't':
		return gjson.True
	case 'f':
		return gjson.False
	case 'n':
		return gjson.Null
	}
	return gjson.Number
}

// SkipSpace returns the index of the first non-space byte of b at or after i.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// SkipString returns the end of the string starting at b[i] (after its
// closing quote).
func SkipString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		i += j
		// The quote is escaped if an odd number of backslashes precede it.
		n := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// SkipValue returns the end of the valid value starting at b[i].
func SkipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = SkipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	}
	for i < len(b) {
		switch c := b[i]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E',
			c >= 'a' && c <= 'z': // true, false, null
			i++
		default:
			return i
		}
	}
	return i
}

// SameKind reports whether two values starting with a and b are of the same
// JSON kind (string, number, object, array, or the same literal).
func SameKind(a, b byte) bool {
	if a == b {
		return true
	}
	return TypeOf(a) == gjson.Number && TypeOf(b) == gjson.Number
}

// StringValues calls fn with the span of every string value of the valid
// JSON document b (object keys excluded), in order.
func StringValues(b []byte, fn func(start, end int)) {
	var stack []byte
	key := false // the next string is an object key
	for i := 0; i < len(b); {
		switch c := b[i]; c {
		case '{', '[':
			stack = append(stack, c)
			key = c == '{'
			i++
		case '}', ']':
			stack = stack[:max(len(stack)-1, 0)]
			i++
		case ',':
			key = len(stack) > 0 && stack[len(stack)-1] == '{'
			i++
		case ':':
			key = false
			i++
		case '"':
			end := SkipString(b, i)
			if !key {
				fn(i, end)
			}
			i = end
		default:
			i++
		}
	}
}

// HasAt reports whether b holds seg at i. Segments of 8 to 16 bytes, the
// fixed bytes between a chunk's varying values (`","logprob":`), are
// compared as two overlapping words instead of by a call.
func HasAt(b []byte, i int, seg []byte) bool {
	n := len(seg)
	if len(b)-i < n {
		return false
	}
	if n >= 8 && n <= 16 {
		x := b[i : i+n]
		return binary.LittleEndian.Uint64(x) == binary.LittleEndian.Uint64(seg) &&
			binary.LittleEndian.Uint64(x[n-8:]) == binary.LittleEndian.Uint64(seg[n-8:])
	}
	return string(b[i:i+n]) == string(seg)
}
