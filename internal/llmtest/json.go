package llmtest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// obj is a JSON object whose keys keep their insertion order, so the server's
// output is byte-for-byte deterministic and ordered like the real servers'.
type obj []kv

type kv struct {
	k string
	v any
}

// raw is JSON text written as is.
type raw string

const null = raw("null")

// encode appends v as compact JSON without HTML escaping (as Python, pydantic
// and the hosted APIs write it).
func encode(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case raw:
		return append(b, v...)
	case json.RawMessage:
		return append(b, v...)
	case string:
		return appendString(b, v)
	case bool:
		return strconv.AppendBool(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case float64:
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	case obj:
		b = append(b, '{')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, e.k)
			b = append(b, ':')
			b = encode(b, e.v)
		}
		return append(b, '}')
	case []any:
		return appendList(b, len(v), func(b []byte, i int) []byte { return encode(b, v[i]) })
	case []obj:
		return appendList(b, len(v), func(b []byte, i int) []byte { return encode(b, v[i]) })
	case []int64:
		return appendList(b, len(v), func(b []byte, i int) []byte { return strconv.AppendInt(b, v[i], 10) })
	case []float64:
		return appendList(b, len(v), func(b []byte, i int) []byte { return strconv.AppendFloat(b, v[i], 'g', -1, 64) })
	case []int:
		return appendList(b, len(v), func(b []byte, i int) []byte { return strconv.AppendInt(b, int64(v[i]), 10) })
	case []string:
		return appendList(b, len(v), func(b []byte, i int) []byte { return appendString(b, v[i]) })
	}
	panic(fmt.Sprintf("llmtest: cannot encode %T", v))
}

func appendList(b []byte, n int, elem func([]byte, int) []byte) []byte {
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, i)
	}
	return append(b, ']')
}

const hex = "0123456789abcdef"

// appendString writes s as a JSON string: UTF-8 kept, control characters,
// quote and backslash escaped, invalid UTF-8 replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
		i++
	}
	return append(b, '"')
}

// marshal encodes v into a new slice.
func marshal(v any) []byte { return encode(make([]byte, 0, 256), v) }

// orNull returns v, or JSON null when cond is false.
func orNull(cond bool, v any) any {
	if !cond {
		return null
	}
	return v
}

// utf8Bytes is the "bytes" list of an OpenAI logprob entry.
func utf8Bytes(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}
