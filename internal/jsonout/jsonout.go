// Package jsonout appends JSON values byte for byte as encoding/json writes
// them, without reflection or a copy of the value: the proxy writes the
// strings of every assembled response and the metadata of every record
// this way, and the records' goldens hold encoding/json's bytes.
package jsonout

import (
	"strconv"
	"unicode/utf8"
)

// String appends s as a JSON string, as encoding/json writes it: the
// quote, the backslash and control characters escaped (\b, \f, \n, \r and
// \t by name, the others as \u00XX), <, > and & as \u003c, \u003e and
// \u0026, U+2028 and U+2029 escaped, and each byte of invalid UTF-8 as
// \ufffd. FuzzString holds it to encoding/json.
func String[S []byte | string](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none of them needs a look: most
		// text a record holds is plain ASCII.
		if i+8 <= len(s) && special8(load8(s, i)) == 0 {
			i += 8
			continue
		}
		for end := min(i+8, len(s)); i < end; {
			c := s[i]
			if c < utf8.RuneSelf {
				if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
					i++
					continue
				}
				b = escape(append(b, s[start:i]...), c)
				i++
				start = i
				continue
			}
			r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
			var esc string
			switch {
			case r == utf8.RuneError && size == 1:
				esc = `\ufffd`
			case r == '\u2028':
				esc = `\u2028`
			case r == '\u2029':
				esc = `\u2029`
			}
			if esc != "" {
				b = append(append(b, s[start:i]...), esc...)
				start = i + size
			}
			i += size
		}
	}
	return append(append(b, s[start:]...), '"')
}

// load8 reads s[i:i+8] as a little-endian word (the compiler makes it one
// load).
func load8[S []byte | string](s S, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// special8 is not zero when a byte of x is one String does not copy as it
// is: below 0x20, non-ASCII, or one of " \ < > &.
func special8(x uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q, bs, lt, gt, amp := x^(lo*'"'), x^(lo*'\\'), x^(lo*'<'), x^(lo*'>'), x^(lo*'&')
	return (x | (x-lo*0x20)&^x | (q-lo)&^q | (bs-lo)&^bs | (lt-lo)&^lt | (gt-lo)&^gt | (amp-lo)&^amp) & hi
}

// escape appends the escape of an ASCII byte String does not copy.
func escape(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
}

// Int32s appends ids as a JSON array of integers (a nil slice as [], as
// its callers want; encoding/json writes null).
func Int32s(b []byte, ids []int32) []byte {
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	return append(b, ']')
}
