package jsonscan

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/tidwall/gjson"
)

var validCases = []struct {
	in   string
	want bool
}{
	{`{"a":[1,-2.5e+3,true,false,null,"x\"y\u00e9"],"b":{}}`, true},
	{` [ ] `, true},
	{`"\ud83d\ude00"`, true},
	{`{"a":1,}`, false},
	{`[01]`, false},
	{`[0,12,345,6789]`, true},
	{`{"ids":[0,12],"b":[1,]}`, false},
	{`[1,2`, false},
	{`[1,2 ]`, true},
	{`[1,-2]`, true},
	{`"a` + "\n" + `b"`, false},
	{`{"a" 1}`, false},
	{`[1.]`, false},
	{`tru`, false},
	{`"\x"`, false},
	{`{"a":1}{"b":2}`, false},
	{``, false},
}

func TestValid(t *testing.T) {
	t.Parallel()
	for _, tc := range validCases {
		if got := Valid([]byte(tc.in)); got != tc.want {
			t.Errorf("Valid(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// FuzzValid holds Valid to the promise its callers rely on: it accepts
// nothing gjson or encoding/json reject, so a chunk it passes is walked
// safely; and ValidValue's end is where SkipValue ends.
func FuzzValid(f *testing.F) {
	for _, tc := range validCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkElems(t, b)
		checkMembers(t, b)
		if Valid(b) {
			if !gjson.ValidBytes(b) || !json.Valid(b) {
				t.Fatalf("Valid(%q) but gjson %v, encoding/json %v", b, gjson.ValidBytes(b), json.Valid(b))
			}
			i := SkipSpace(b, 0)
			end, ok := ValidValue(b, i)
			if !ok || SkipValue(b, i) != end || SkipSpace(b, end) != len(b) {
				t.Fatalf("%q: ValidValue end %d %v, SkipValue end %d", b, end, ok, SkipValue(b, i))
			}
		}
	})
}

func TestStringValues(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"a":"x","b":["y",{"c":"z\"","d":1}],"e":{"f":"w"}}`)
	var got []string
	StringValues(doc, func(s, e int) { got = append(got, string(doc[s:e])) })
	want := []string{`"x"`, `"y"`, `"z\""`, `"w"`}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// TestValidStringBytes puts every byte value at every position of strings
// long enough for the eight-bytes-at-a-time scan, alone and escaped, and
// compares Valid with encoding/json.
func TestValidStringBytes(t *testing.T) {
	t.Parallel()
	const base = "abcdefghijklmnopqrstuvwxyz0123"
	for c := range 256 {
		for p := range len(base) + 1 {
			for _, ins := range []string{string([]byte{byte(c)}), `\` + string([]byte{byte(c)})} {
				b := []byte(`["` + base[:p] + ins + base[p:] + `",1]`)
				if got, want := Valid(b), json.Valid(b); got != want {
					t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
				}
			}
		}
	}
}

// checkMembers holds ValidMembers to Valid (same verdict for an object)
// and, where valid, its members to gjson's.
func checkMembers(t *testing.T, b []byte) {
	t.Helper()
	members, ok := ValidMembers(b, nil)
	root := gjson.ParseBytes(b)
	if want := Valid(b) && root.IsObject(); ok != want {
		t.Fatalf("ValidMembers(%q) = %v, Valid and an object: %v", b, ok, want)
	}
	if !ok {
		return
	}
	k := 0
	root.ForEach(func(key, v gjson.Result) bool {
		if k >= len(members) {
			t.Fatalf("%q: gjson has more members than %v", b, members)
		}
		m := members[k]
		if string(b[m.Key.Start:m.Key.End]) != key.Raw || string(b[m.Value.Start:m.Value.End]) != v.Raw {
			t.Fatalf("%q: member %d is %q: %q, gjson %q: %q", b, k, b[m.Key.Start:m.Key.End], b[m.Value.Start:m.Value.End], key.Raw, v.Raw)
		}
		k++
		return true
	})
	if k != len(members) {
		t.Fatalf("%q: %d members, gjson %d", b, len(members), k)
	}
	// Handing the member arrays to a reader that takes the plain integer
	// ones (as the assembler's prompt ids) changes nothing, nor does one
	// that takes none; every array member is offered, once.
	offered := 0
	for _, take := range []bool{true, false} {
		got, gok := ValidMembersWith(b, nil, func(key Span, i int) (int, bool) {
			if b[key.Start] != '"' || b[i] != '[' {
				t.Fatalf("%q: offered key %v and value at %d", b, key, i)
			}
			offered++
			if !take {
				return 0, false
			}
			return plainInts(b, i)
		})
		if gok != ok || !slices.Equal(got, members) {
			t.Fatalf("%q: ValidMembersWith (taking %v) = %v, %v; ValidMembers %v, %v", b, take, got, gok, members, ok)
		}
	}
	arrays := 0
	for _, m := range members {
		if b[m.Value.Start] == '[' {
			arrays++
		}
	}
	if offered != 2*arrays {
		t.Fatalf("%q: %d member arrays offered, want %d", b, offered/2, arrays)
	}
}

// checkElems holds ValidValueElems to ValidValue (same end and verdict at
// every offset) and, where valid, to the elements SkipValue walks.
func checkElems(t *testing.T, b []byte) {
	t.Helper()
	for i := range b {
		end, ok := ValidValue(b, i)
		gotEnd, gotOK, elems := ValidValueElems(b, i, "logprob", nil)
		if gotEnd != end || gotOK != ok {
			t.Fatalf("%q at %d: ValidValueElems %d %v, ValidValue %d %v", b, i, gotEnd, gotOK, end, ok)
		}
		if !ok || b[i] != '{' {
			continue
		}
		for _, e := range elems {
			if e.Start <= i || e.End > end || SkipValue(b, e.Start) != e.End {
				t.Fatalf("%q at %d: element %v", b, i, e)
			}
			if m := firstMember(b[e.Start:e.End], "logprob"); e.Member != Unknown && e.Member != m.shift(e.Start) {
				t.Fatalf("%q at %d: element %v: member %v, want %v", b, i, e, e.Member, m.shift(e.Start))
			}
		}
	}
}

// firstMember is the extent of the first member of the object v whose
// key, unescaped, is key, found by gjson; the zero Span if none.
func firstMember(v []byte, key string) Span {
	if len(v) == 0 || v[0] != '{' {
		return Span{}
	}
	var out Span
	gjson.ParseBytes(v).ForEach(func(k, val gjson.Result) bool {
		if k.String() != key {
			return true
		}
		out = Span{val.Index, val.Index + len(val.Raw)}
		return false
	})
	return out
}

func (s Span) shift(d int) Span {
	if s == (Span{}) {
		return s
	}
	return Span{s.Start + d, s.End + d}
}

func TestValidValueElems(t *testing.T) {
	t.Parallel()
	for _, tc := range validCases {
		checkElems(t, []byte(tc.in))
		checkMembers(t, []byte(tc.in))
	}
	checkMembers(t, []byte(` {"a" : [1, {"b":2}] ,"a":null, "c":"\u00e9"} `))
	doc := []byte(`{"content":[{"token":"a","logprob":-1,"top_logprobs":[]}, {"token":"b"} ],"x":{"y":[1]},"refusal":[],"z":[1 ,[2,3]]}`)
	end, ok, elems := ValidValueElems(doc, 0, "logprob", nil)
	want := []string{`{"token":"a","logprob":-1,"top_logprobs":[]}`, `{"token":"b"}`, `1`, `[2,3]`}
	members := []string{"-1", "", "", ""}
	if end != len(doc) || !ok || len(elems) != len(want) {
		t.Fatalf("%d %v %v", end, ok, elems)
	}
	for k, e := range elems {
		if string(doc[e.Start:e.End]) != want[k] || string(doc[e.Member.Start:e.Member.End]) != members[k] {
			t.Fatalf("element %d: %q member %q, want %q member %q", k, doc[e.Start:e.End], doc[e.Member.Start:e.Member.End], want[k], members[k])
		}
	}
	escaped := []byte(`{"c":[{"a":1,"lo\u0067prob":2,"logprob":3},{"logprob":4,"\u0061":5}]}`)
	_, _, elems = ValidValueElems(escaped, 0, "logprob", nil)
	if len(elems) != 2 || elems[0].Member != Unknown || string(escaped[elems[1].Member.Start:elems[1].Member.End]) != "4" {
		t.Fatalf("escaped keys: %v", elems)
	}
	checkElems(t, doc)
	for n := range doc {
		checkElems(t, doc[:n])
	}
}

// TestHasAt compares HasAt with bytes.HasPrefix for segments of every
// length up to 24 at every offset, equal and differing in each byte.
func TestHasAt(t *testing.T) {
	b := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	for i := 0; i <= len(b); i++ {
		for n := 0; n <= 24; n++ {
			seg := make([]byte, n)
			copy(seg, b[i:])
			for k := -1; k < n; k++ {
				s := slices.Clone(seg)
				if k >= 0 {
					s[k] ^= 0x40
				}
				if got, want := HasAt(b, i, s), bytes.HasPrefix(b[i:], s); got != want {
					t.Fatalf("HasAt(%q, %d, %q) = %v, want %v", b, i, s, got, want)
				}
			}
		}
	}
}

// FuzzPlainInts holds plainInts, which reads a word at a time while it
// can, to a byte-by-byte reading of the same grammar: the same answer and
// the same end, for any bytes after a '['.
func FuzzPlainInts(f *testing.F) {
	for _, s := range []string{"[]", "[1]", "[1,2,3]", "[114,101,97,100],", "[0,10,200,3000,40000,500000,6000000,70000000,800000000]",
		"[01,2,3,4,5,6,7,8]", "[1,2,3,4,5,6,7,8,]", "[1234567,12345678,1]", "[1 ,2]", "[1,-2,3,4,5,6,7,8]", "[9,8,7,6,5,4,3,2,1]x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != '[' {
			return
		}
		end, ok := plainInts(b, 0)
		wend, wok := plainIntsBytes(b, 0)
		if ok != wok || ok && end != wend {
			t.Fatalf("plainInts(%q) = %d, %v; byte by byte %d, %v", b, end, ok, wend, wok)
		}
	})
}

// plainIntsBytes is plainInts read one byte at a time.
func plainIntsBytes(b []byte, i int) (int, bool) {
	if i+1 < len(b) && b[i+1] == ']' {
		return i + 2, true
	}
	return plainIntsRest(b, i+1)
}

// FuzzDigitWord holds DigitWord, and digits, which skips a word at a time,
// to byte-by-byte readings: the digits before the first other byte or the
// end, at most eight, and their number.
func FuzzDigitWord(f *testing.F) {
	for _, s := range []string{"12345678", "0", "009614944458007812,", "1.5", "-1", "99999999999", "1234567", "7/", "3:", "\x00\x00"} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, b []byte, at uint8) {
		if len(b) == 0 {
			return
		}
		i := int(at) % len(b)
		k, v := DigitWord(b, i)
		wk, wv := 0, uint64(0)
		for j := i; j < len(b) && j-i < 8 && b[j] >= '0' && b[j] <= '9'; j++ {
			wk, wv = wk+1, wv*10+uint64(b[j]-'0')
		}
		if k != wk || v != wv {
			t.Fatalf("DigitWord(%q, %d) = %d, %d; byte by byte %d, %d", b, i, k, v, wk, wv)
		}
		end := i
		for end < len(b) && b[end] >= '0' && b[end] <= '9' {
			end++
		}
		if got := digits(b, i); got != end {
			t.Fatalf("digits(%q, %d) = %d, want %d", b, i, got, end)
		}
	})
}
