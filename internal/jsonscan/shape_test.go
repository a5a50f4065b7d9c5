package jsonscan

import (
	"slices"
	"strings"
	"testing"
)

// shapeSeeds are logprobs objects as vLLM and SGLang stream them, and
// objects that test the skeleton's edges.
var shapeSeeds = []string{
	`{"content":[{"token":"diff","logprob":-0.125,"bytes":[100,105,102,102],"top_logprobs":[]}]}`,
	`{"content":[{"token":"a","logprob":-1.5e-3,"bytes":[97],"top_logprobs":[{"token":"a","logprob":-0.001,"bytes":[97]},{"token":"b","logprob":-7,"bytes":null}]}],"refusal":null}`,
	`{ "content" : [ {"token":"\"}","logprob":-0.75,"bytes":[34,125],"top_logprobs":[]} ] }`,
	`{"content":[],"refusal":[{"logprob":1}]}`,
	`{"a":{"b":[1,2,[3]],"c":true},"d":[[1],{"logprob":2}],"e":"x"}`,
	`{}`,
}

// TestShapeMatch: a chunk's next logprobs object, with other tokens,
// logprobs and bytes, matches its shape; one with another structure does
// not; and what matches is what ValidValueElems finds, where a Mover says.
func TestShapeMatch(t *testing.T) {
	var s Shape
	if !s.Build([]byte(shapeSeeds[0])) {
		t.Fatal("no shape")
	}
	if len(s.slots) != 3 { // token, logprob, bytes; top_logprobs' [] is fixed
		t.Fatalf("slots %v, want 3", s.slots)
	}
	for _, tc := range []struct {
		v  string
		ok bool
	}{
		{`{"content":[{"token":"x\n\u00e9","logprob":-12.5,"bytes":[120,10,195,169],"top_logprobs":[]}]}`, true},
		{`{"content":[{"token":"y","logprob":0,"bytes":[],"top_logprobs":[]}]}`, true},
		{`{"content":[{"token":"y","logprob":0,"bytes":null,"top_logprobs":[]}]}`, false},
		{`{"content":[{"token":"y","logprob":"0","bytes":[1],"top_logprobs":[]}]}`, false},
		{`{"content":[{"token":"y","logprob":-01,"bytes":[1],"top_logprobs":[]}]}`, false},
		{`{"content":[{"token":"y","logprob":1,"bytes":[1, 2],"top_logprobs":[]}]}`, false},
		{`{"content":[{"token":"y","logprob":1,"bytes":[1],"top_logprobs":[{"token":"y"}]}]}`, false},
		{`{"content":[{"token":"y","logprob":1,"bytes":[1],"top_logprobs":[2]}]}`, false},
		{`{"content":[{"token":"y","logprob":1,"bytes":[1],"top_logprobs":[]},{"token":"z"}]}`, false},
		{`{"content":[{"token":"y\q","logprob":1,"bytes":[1],"top_logprobs":[]}]}`, false},
		{`{"content":[{"token":"y","logprob":1,"bytes":[1],"top_logprobs":[]}]`, false},
	} {
		checkShape(t, &s, []byte("data: "+tc.v+"}\n"), 6)
		_, ok, _ := s.Match([]byte(tc.v), 0, nil)
		if ok != tc.ok {
			t.Errorf("%s: match %v, want %v", tc.v, ok, tc.ok)
		}
	}
	// The object's own member arrays are not slots: their elements are
	// what ValidValueElems reports.
	if !s.Build([]byte(`{"content":[],"x":[1]}`)) {
		t.Fatal("no shape")
	}
	for _, v := range []string{`{"content":[7],"x":[1]}`, `{"content":[],"x":[1,2]}`} {
		if _, ok, _ := s.Match([]byte(v), 0, nil); ok {
			t.Errorf("%s matches the shape of {\"content\":[],\"x\":[1]}", v)
		}
	}
	// An empty list is fixed: it matches only itself.
	if !s.Build([]byte(`{"content":[{"token":"","bytes":[]}]}`)) || len(s.slots) != 1 {
		t.Fatalf("shape of an empty token: slots %v, want 1", s.slots)
	}
	if _, ok, _ := s.Match([]byte(`{"content":[{"token":"a","bytes":[97]}]}`), 0, nil); ok {
		t.Error("[97] matches an empty list")
	}
	if s.Build([]byte(`[1]`)) || s.Build([]byte(`{"a":}`)) || s.Build([]byte(`{"a":1}x`)) {
		t.Error("a shape of what is not one valid object")
	}
	if _, ok, _ := s.Match([]byte(`{"a":1}`), 0, nil); ok {
		t.Error("a failed Build left a shape that matches")
	}
}

// offset is where the byte x of s's source lies in the value matched at
// start with ends, from a fresh Mover: the reference one Mover asked in
// order is held to.
func offset(s *Shape, x, start int, ends []Span) int {
	m := s.Mover(start, ends)
	return m.At(x)
}

// checkShape: where s matches b at i, ValidValueElems accepts the same
// extent and finds the source's elements moved as offset says.
func checkShape(t *testing.T, s *Shape, b []byte, i int) {
	t.Helper()
	end, ok, ends := s.Match(b, i, nil)
	if !ok {
		return
	}
	gEnd, gOK, got := ValidValueElems(b, i, "logprob", nil)
	if !gOK || gEnd != end {
		t.Fatalf("%q at %d: shape matched to %d, ValidValueElems %d %v", b, i, end, gEnd, gOK)
	}
	_, _, src := ValidValueElems(s.src, 0, "logprob", nil)
	want := make([]Elem, len(src))
	for k, e := range src {
		want[k].Span = Span{offset(s, e.Start, i, ends), offset(s, e.End, i, ends)}
		want[k].Member = e.Member
		if e.Member.Start > 0 {
			want[k].Member = Span{offset(s, e.Member.Start, i, ends), offset(s, e.Member.End, i, ends)}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%q at %d: ValidValueElems found %v, the shape says %v", b, i, got, want)
	}
	// One Mover, asked in document order, agrees with a fresh one per offset.
	mv := s.Mover(i, ends)
	for k, e := range src {
		moved := Elem{Span: Span{Start: mv.At(e.Start)}, Member: e.Member}
		if e.Member.Start > 0 {
			moved.Member = Span{mv.At(e.Member.Start), mv.At(e.Member.End)}
		}
		if moved.End = mv.At(e.End); moved != want[k] {
			t.Fatalf("%q at %d: element %d moved to %v, a fresh Mover says %v", b, i, k, moved, want[k])
		}
	}
}

// FuzzShape: a value made from a seed's by replacing its slots' values,
// or any bytes at all, either does not match the seed's shape or is what
// ValidValueElems says it is.
func FuzzShape(f *testing.F) {
	for k, s := range shapeSeeds {
		f.Add(uint8(k), "x\x1f-1\x1f[5,6]", s)
	}
	f.Add(uint8(0), "\"\\u12\x1f1e5\x1f[]\x1f[0]", `{"content":[]}`)
	f.Add(uint8(3), "[5]", "")
	f.Fuzz(func(t *testing.T, seed uint8, vals, raw string) {
		var s Shape
		if !s.Build([]byte(shapeSeeds[int(seed)%len(shapeSeeds)])) {
			t.Fatal("no shape of a seed")
		}
		// The seed with its slots' values replaced, in order.
		var b strings.Builder
		b.WriteString("[[")
		from := 0
		repl := strings.Split(vals, "\x1f")
		for k, sl := range s.slots {
			b.Write(s.src[from:sl.Start])
			if k < len(repl) {
				b.WriteString(repl[k])
			} else {
				b.Write(s.src[sl.Start:sl.End])
			}
			from = sl.End
		}
		b.Write(s.src[from:])
		b.WriteString("]]")
		checkShape(t, &s, []byte(b.String()), 2)
		checkShape(t, &s, []byte(raw), 0)
	})
}

// slotValueByGrammar is SlotValue by the grammar's checks alone: a number
// through the check of any value, a string a byte at a time (validString
// scans eight at a time).
func slotValueByGrammar(b []byte, i int, kind byte) (int, bool) {
	if i >= len(b) || !SameKind(b[i], kind) {
		return i, false
	}
	switch kind {
	case '[':
		return plainInts(b, i)
	case '"':
		return stringByBytes(b, i)
	}
	return validValue(b, i, 0)
}

// stringByBytes is validString a byte at a time, failing where it fails.
func stringByBytes(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < ' ':
			return i, false
		case c != '\\':
			continue
		}
		if i++; i >= len(b) {
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
	return i, false
}

// FuzzSlotValue: SlotValue (its number shortcut, validString's word scan)
// answers what the grammar's checks answer, end included, for every kind
// of slot at every offset.
func FuzzSlotValue(f *testing.F) {
	for _, s := range []string{`"tok","logprob":-0.125,"bytes":[1]`, `-0.125,`, `-0.1e5,"x"`, `"a\"b"......`,
		`"\u00e9"........`, `"a\u12"........`, `"ab\x"`, `"abcdefghijklmnop\`, "\"ab\x01cdefghij\"", `0.,,,,,,,,,`, `-,,,,,,,,,,`, `01234567890`, `"abcdefgh"`, `"abcdefg"`, `[97,98,99,100]`, `true,`, `-`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s[:min(len(s), 256)]) // every offset: keep it quadratic in little
		for i := range len(b) + 1 {
			for _, kind := range []byte{'"', '[', '-', '0', '7', 't', 'n'} {
				end, ok := SlotValue(b, i, kind)
				wantEnd, wantOK := slotValueByGrammar(b, i, kind)
				if end != wantEnd || ok != wantOK {
					t.Fatalf("%q at %d, kind %q: %d %v, the grammar says %d %v", b, i, kind, end, ok, wantEnd, wantOK)
				}
			}
		}
	})
}
