package jsonscan

// A Shape is the skeleton of a JSON object: its bytes with the values that
// vary from one stream chunk to the next cut out as slots. A slot is every
// string that is not a key, every number and literal, and every non-empty
// array of plain integers below the object's own members (a logprobs
// entry's "bytes"); the object's member arrays themselves (a logprobs
// object's "content") stay in the skeleton, element by element, and so
// does an empty array (a vLLM logprobs entry's "top_logprobs" when none
// were asked for, in every chunk), which then matches only itself.
//
// A value matches the shape when it equals the skeleton's bytes outside the
// slots and each slot holds a valid value of the kind the shape's source
// held there (an integer array: plain integers again). Such a value is
// valid and has the source's structure, keys and members in the same
// places, so whatever ValidValueElems finds in it sits where it sat in the
// source, moved by the slots' change in length before it (Mover). That
// makes checking a vLLM logprobs object, which every token's chunk carries,
// a compare of its fixed bytes and a scan of its token, logprob and bytes
// instead of a walk of the whole object.
type Shape struct {
	src   []byte // the source value (aliased)
	slots []Span // extents in src
	kinds []byte // per slot: the first byte of the source's value there
}

// Build makes s the shape of the valid object v, reusing s's memory, and
// reports whether it could: not when v is not an object, not valid, or
// nested past what Valid accepts (s then matches nothing). s aliases v,
// which must not change while s is in use.
func (s *Shape) Build(v []byte) bool {
	s.src, s.slots, s.kinds = nil, s.slots[:0], s.kinds[:0]
	if len(v) == 0 || v[0] != '{' {
		return false
	}
	if end, ok := ValidValue(v, 0); !ok || end != len(v) {
		return false
	}
	s.src = v
	s.object(0, true)
	return true
}

// object notes the slots of the object at src[i] and returns its end;
// top says it is the shape's own object.
func (s *Shape) object(i int, top bool) int {
	i = SkipSpace(s.src, i+1)
	for s.src[i] != '}' {
		i = SkipSpace(s.src, SkipString(s.src, i)) // the key, then ':'
		i = s.value(SkipSpace(s.src, i+1), top)
		if i = SkipSpace(s.src, i); s.src[i] == ',' {
			i = SkipSpace(s.src, i+1)
		}
	}
	return i + 1
}

// value notes the slots of the value at src[i] and returns its end; member
// says it is a member of the shape's own object.
func (s *Shape) value(i int, member bool) int {
	switch s.src[i] {
	case '{':
		return s.object(i, false)
	case '[':
		if end, ok := plainInts(s.src, i); ok && !member {
			if end-i > 2 {
				s.slot(i, end)
			}
			return end
		}
		i = SkipSpace(s.src, i+1)
		for s.src[i] != ']' {
			i = SkipSpace(s.src, s.value(i, false))
			if s.src[i] == ',' {
				i = SkipSpace(s.src, i+1)
			}
		}
		return i + 1
	}
	end := SkipValue(s.src, i)
	s.slot(i, end)
	return end
}

func (s *Shape) slot(start, end int) {
	s.slots = append(s.slots, Span{start, end})
	s.kinds = append(s.kinds, s.src[start])
}

// Match reports whether b holds a value of s's shape at i, and where it
// ends. It appends the extent in b of each slot's value to ends, which
// Mover reads; when it reports false, what it appended is meaningless.
func (s *Shape) Match(b []byte, i int, ends []Span) (int, bool, []Span) {
	if s.src == nil {
		return i, false, ends
	}
	from := 0 // position in src
	for k, sl := range s.slots {
		seg := s.src[from:sl.Start]
		if !HasAt(b, i, seg) {
			return i, false, ends
		}
		i += len(seg)
		end, ok := SlotValue(b, i, s.kinds[k])
		if !ok {
			return i, false, ends
		}
		ends = append(ends, Span{i, end})
		i, from = end, sl.End
	}
	seg := s.src[from:]
	if !HasAt(b, i, seg) {
		return i, false, ends
	}
	return i + len(seg), true, ends
}

// SlotValue reports whether b holds at i a value that may fill a slot
// whose source value began with kind (see Shape), and where it ends.
func SlotValue(b []byte, i int, kind byte) (int, bool) {
	if i >= len(b) || !SameKind(b[i], kind) {
		return i, false
	}
	switch kind {
	case '[':
		return plainInts(b, i)
	case '"':
		return validString(b, i)
	}
	if c := b[i]; c == '-' || c-'0' <= 9 {
		return validNumber(b, i) // a logprob
	}
	return validValue(b, i, 0) // a literal
}

// Slots returns the extents of s's slots in its source and, per slot, the
// first byte of the source's value there. Neither may be changed.
func (s *Shape) Slots() ([]Span, []byte) { return s.slots, s.kinds }

// Slot returns the index of the slot whose extent in the shape's source
// is sp, or -1 when no slot has that extent.
func (s *Shape) Slot(sp Span) int {
	for k, sl := range s.slots {
		if sl == sp {
			return k
		}
	}
	return -1
}

// A Mover tells where bytes of the shape's source lie in the value Match
// matched, given the slot extents it appended (ends) and the value's
// start: an offset x moves by the change in length of the slots that end
// at or before it. Offsets are asked in increasing order, as a value's
// elements and their members come, so each slot's change in length is
// added once, however many offsets lie after it.
type Mover struct {
	slots, ends []Span
	k, n        int // the slots passed; start plus their change in length
}

// Mover returns a Mover into the value Match matched at start with ends.
func (s *Shape) Mover(start int, ends []Span) Mover {
	return Mover{slots: s.slots, ends: ends, n: start}
}

// At returns where the source's byte x lies in the matched value. x must
// not lie inside a slot, nor be less than the x asked before it.
func (m *Mover) At(x int) int {
	for m.k < len(m.slots) && m.slots[m.k].End <= x {
		sl, e := m.slots[m.k], m.ends[m.k]
		m.n += (e.End - e.Start) - (sl.End - sl.Start)
		m.k++
	}
	return m.n + x
}
