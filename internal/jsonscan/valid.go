package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// Valid reports whether b is one JSON value (with optional surrounding
// space) by the grammar of RFC 8259. It accepts nothing gjson.ValidBytes
// rejects (a fuzz test holds it to that) and is cheaper: chunks pass here
// once each, and the rare document it rejects is asked of gjson again.
func Valid(b []byte) bool {
	i := SkipSpace(b, 0)
	i, ok := validValue(b, i, 0)
	return ok && SkipSpace(b, i) == len(b)
}

// maxDepth bounds nesting so that a hostile chunk cannot grow the stack
// without end; deeper documents go to gjson.
const maxDepth = 64

func validValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > maxDepth {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return validString(b, i)
	case c == '{':
		return validObject(b, i, depth, nil)
	case c == '[':
		return validArray(b, i, depth+1)
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return validNumber(b, i)
	}
	return i, false
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

func validArray(b []byte, i, depth int) (int, bool) {
	if end, ok := plainInts(b, i); ok {
		return end, true
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = validValue(b, i, depth); !ok {
			return i, false
		}
		i = SkipSpace(b, i)
		switch {
		case i >= len(b):
			return i, false
		case b[i] == ']':
			return i + 1, true
		case b[i] != ',':
			return i, false
		}
		i = SkipSpace(b, i+1)
	}
}

// plainInts reports whether the array at b[i] is a list of non-negative
// integers written without space or sign (token ids: a long prompt's are
// most of a vLLM stream's first chunk), and where it ends, in one tight
// scan. Anything else reports false and is validated by the general walk.
func plainInts(b []byte, i int) (int, bool) {
	i++
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	// While eight bytes are left, an integer of one to seven digits and
	// the byte after it are found with one test of the word there (see
	// DigitsAt); anything else goes to the byte loop, from the integer's
	// start.
	for len(b)-i >= 8 {
		k := DigitsAt(b, i)
		if k == 0 {
			break
		}
		if c := b[i+k]; c == ',' {
			i += k + 1
			continue
		} else if c == ']' {
			return i + k + 1, true
		}
		break
	}
	return plainIntsRest(b, i)
}

// plainIntsRest is plainInts read one byte at a time from b[i], the start
// of an integer of the list.
func plainIntsRest(b []byte, i int) (int, bool) {
	for i < len(b) {
		start := i
		for i < len(b) && b[i]-'0' <= 9 {
			i++
		}
		if i == start || b[start] == '0' && i-start > 1 || i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ']':
			return i + 1, true
		case ',':
			i++
		default:
			return i, false
		}
	}
	return i, false
}

// DigitsAt returns how many digits the eight bytes at b[i] (which must be
// there) start with, when that is one to seven without a leading zero, and
// otherwise 0. A byte's top bit is set in the test where the byte is not a
// digit: below '0' it borrowed, above '9' adding 0x76 carried into it;
// borrows and carries reach only the bytes after the first non-digit.
func DigitsAt(b []byte, i int) int {
	k, x := leadDigits(b, i)
	if k == 8 || byte(x) == 0 && k > 1 {
		return 0
	}
	return k
}

// leadDigits returns how many of the eight bytes at b[i] (which must be
// there) are digits before the first that is not (8 when all are), and the
// bytes as a little-endian word less '0' in each (see DigitsAt).
func leadDigits(b []byte, i int) (int, uint64) {
	return wordDigits(binary.LittleEndian.Uint64(b[i:]))
}

// wordDigits is leadDigits for the eight bytes of w, little-endian.
func wordDigits(w uint64) (int, uint64) {
	x := w - 0x3030303030303030
	return bits.TrailingZeros64((x|(x+0x7676767676767676))&0x8080808080808080) >> 3, x
}

// DigitWord reads up to eight bytes of b from b[i] on, i < len(b): k is
// how many are digits before the first that is not or the end of b (8 when
// all eight are), and v the number those k digits write, combined in
// pairs, then fours, then eights. Near the end of b it loads the last
// eight bytes and shifts the ones before i out.
func DigitWord(b []byte, i int) (k int, v uint64) {
	var w uint64
	switch n := len(b) - i; {
	case n >= 8:
		w = binary.LittleEndian.Uint64(b[i:])
	case len(b) >= 8:
		w = binary.LittleEndian.Uint64(b[len(b)-8:]) >> (64 - 8*uint(n))
	default:
		for j := len(b) - 1; j >= i; j-- {
			w = w<<8 | uint64(b[j])
		}
	}
	k, x := wordDigits(w) // a zero byte past the end is no digit
	if k == 0 {
		return 0, 0
	}
	x <<= 64 - 8*uint(k) // the k digits at the top, zeros below
	x = (x*10 + x>>8) & 0x00FF00FF00FF00FF
	x = (x*100 + x>>16) & 0x0000FFFF0000FFFF
	return k, (x*10000 + x>>32) & 0xFFFFFFFF
}

// strPlain marks the bytes a string holds as they are: anything but a
// control character, a quote or a backslash.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func validString(b []byte, i int) (int, bool) {
	for i++; ; i++ {
		// The next byte a string does not hold as it is (see strPlain),
		// eight bytes at a time while eight are left, in this loop rather
		// than a call: strings are validated for every chunk the proxy
		// strips, and most are a few bytes.
		for len(b)-i >= 8 {
			if m := special8(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		for i < len(b) && strPlain[b[i]] {
			i++
		}
		if i >= len(b) {
			return i, false
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < ' ':
			return i, false
		}
		// A backslash.
		i++
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if len(b)-i < 5 || !hex4(b[i+1:i+5]) {
				return i, false
			}
			i += 4
		default:
			return i, false
		}
	}
}

// special8 flags (high bit) the bytes of x below 0x20 or equal to '"' or
// '\\'. A flag above a flagged byte may be false (a borrow), so only the
// lowest one is meaningful.
func special8(x uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q, s := x^(lo*'"'), x^(lo*'\\')
	return ((x-lo*0x20)&^x | (q-lo)&^q | (s-lo)&^s) & hi
}

func hex4(h []byte) bool {
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func validNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

// digits returns where the run of digits from b[i] ends, reading eight
// bytes at a time while eight are left (a logprob has 16 or 17 digits).
func digits(b []byte, i int) int {
	for len(b)-i >= 8 {
		k, _ := wordDigits(binary.LittleEndian.Uint64(b[i:]))
		if i += k; k < 8 {
			return i
		}
	}
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// ValidValue reports whether a valid JSON value starts at b[i], and where it
// ends.
func ValidValue(b []byte, i int) (end int, ok bool) { return validValue(b, i, 0) }

// Span is the extent of a value in a document: b[Start:End].
type Span struct{ Start, End int }

// Member is a member of an object: its key (the string, quotes included)
// and its value.
type Member struct{ Key, Value Span }

// ValidMembers reports whether b is one JSON object (with optional
// surrounding space), as Valid would, and appends its members to members in
// order, found in the same scan: a caller that walks the object after
// validating it need not skip each value again. When it reports false,
// what it appended is meaningless.
func ValidMembers(b []byte, members []Member) ([]Member, bool) {
	return ValidMembersWith(b, members, nil)
}

// ValidMembersWith is ValidMembers that first offers the value of each
// member that is an array to array, with the member's key and the
// array's offset: array may read the array itself (a caller that converts
// it anyway, token ids, need not have it scanned twice) and report where
// it ends, but only for an array that is valid JSON; reporting false leaves
// the array to ValidMembers.
func ValidMembersWith(b []byte, members []Member, array func(key Span, i int) (int, bool)) ([]Member, bool) {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return members, false
	}
	sc := objScan{members: &members, array: array}
	end, ok := validObject(b, i, 0, &sc)
	return members, ok && SkipSpace(b, end) == len(b)
}

// Elem is an element of an array member of an object (see
// ValidValueElems): its extent, and the extent of its first member with
// the key asked for when it is an object. Member is the zero Span when the
// element has no such member, and Unknown when a key with an escape came
// first (the caller compares unescaped keys itself).
type Elem struct {
	Span
	Member Span
}

// Unknown is Elem.Member for an element whose keys were not all compared.
var Unknown = Span{-1, -1}

// ValidValueElems is ValidValue that, for an object, also appends to elems
// the elements of its array members, in order (a logprobs object's
// entries), each with its member named key (see Elem), found in the same
// scan. When it reports false, what it appended is meaningless.
func ValidValueElems(b []byte, i int, key string, elems []Elem) (int, bool, []Elem) {
	if i >= len(b) || b[i] != '{' {
		end, ok := ValidValue(b, i)
		return end, ok, elems
	}
	sc := objScan{elemKey: key, elems: &elems}
	end, ok := validObject(b, i, 0, &sc)
	return end, ok, elems
}

// validArrayElems is validArray appending its elements, each object
// scanned for its member named key.
func validArrayElems(b []byte, i, depth int, key string, elems *[]Elem) (int, bool) {
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		start := i
		var ok bool
		sc := objScan{key: key}
		if i < len(b) && b[i] == '{' {
			i, ok = validObject(b, i, depth, &sc)
		} else {
			i, ok = validValue(b, i, depth)
		}
		if !ok {
			return i, false
		}
		*elems = append(*elems, Elem{Span{start, i}, sc.member})
		i = SkipSpace(b, i)
		switch {
		case i >= len(b):
			return i, false
		case b[i] == ']':
			return i + 1, true
		case b[i] != ',':
			return i, false
		}
		i = SkipSpace(b, i+1)
	}
}

// objScan asks validObject for more than its verdict, found in the same
// scan; a nil *objScan asks for nothing.
type objScan struct {
	// key: find the value of the first member whose key is exactly key
	// (member; Unknown when a key with an escape comes first).
	key    string
	member Span
	found  bool
	// members: append every member.
	members *[]Member
	// elems: append the elements of every array member, each object
	// scanned for its member named elemKey (see Elem).
	elems   *[]Elem
	elemKey string
	// array: offered every array member first (see ValidMembersWith).
	array func(key Span, i int) (int, bool)
}

// note takes in one member of the object.
func (s *objScan) note(b []byte, key, value Span) {
	if s.members != nil {
		*s.members = append(*s.members, Member{key, value})
	}
	if s.key == "" || s.found {
		return
	}
	name := b[key.Start+1 : key.End-1]
	switch {
	case string(name) == s.key:
		s.member, s.found = value, true
	case bytes.IndexByte(name, '\\') >= 0:
		s.member, s.found = Unknown, true
	}
}

// validObject is validValue for the object at b[i], doing what s asks.
func validObject(b []byte, i, depth int, s *objScan) (int, bool) {
	if depth > maxDepth {
		return i, false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		k := i
		var ok bool
		if i, ok = validString(b, i); !ok {
			return i, false
		}
		key := Span{k, i}
		i = SkipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return i, false
		}
		v := SkipSpace(b, i+1)
		switch {
		case s != nil && s.array != nil && v < len(b) && b[v] == '[':
			if i, ok = s.array(key, v); !ok {
				i, ok = validValue(b, v, depth+1)
			}
		case s != nil && s.elems != nil && v < len(b) && b[v] == '[':
			// what validValue(b, v, depth+1) would validate, at its depth
			i, ok = validArrayElems(b, v, depth+2, s.elemKey, s.elems)
		default:
			i, ok = validValue(b, v, depth+1)
		}
		if !ok {
			return i, false
		}
		if s != nil {
			s.note(b, key, Span{v, i})
		}
		i = SkipSpace(b, i)
		switch {
		case i >= len(b):
			return i, false
		case b[i] == '}':
			return i + 1, true
		case b[i] != ',':
			return i, false
		}
		i = SkipSpace(b, i+1)
	}
}
