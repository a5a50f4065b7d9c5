package assemble

import (
	"slices"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/jsonscan"
	"github.com/orchard-rl/orchard/recorder"
)

// FuzzAppendIDs: the plain-integer fast path appends exactly what reading
// each element as a value does, and says so as often.
func FuzzAppendIDs(f *testing.F) {
	for _, s := range []string{"[]", "[1,2,3]", " [ 0 , 151644 ] ", "[2147483647]", "[2147483648]", "[-1]", "[1.0]",
		"[1e3]", "[01]", "[1 2]", `["1"]`, "[1,]", "[1,2", "[99999999999999999999]", "[0,0]", "[3]x",
		// Long enough for appendIDWords, which reads eight bytes at a time.
		"[1,22,333,4444,55555,666666,7777777,88888888,999999999,0,7,151643,2147483647]",
		"[1234567,12345678,1234567,01234,5]", "[0,00,1,2,3,4,5,6,7,8,9]", "[12,3a,4,5,6,7,8,9]", "[1,2,3,4,5,6,7,8,9,-1]",
		"[123/456,1,2,3,4,5,6,7]", "[123:456,1,2,3,4,5,6,7]", "[1,2,3 ,4,5,6,7,8,9]", "[2147483648,1,2,3,4,5,6,7,8]"} {
		f.Add([]byte(s), uint8(2))
	}
	f.Fuzz(func(t *testing.T, b []byte, pre uint8) {
		v := valOf(b)
		if !v.IsArray() || !gjson.ValidBytes(b) {
			return // the assembler reads ids only from chunks it found valid
		}
		prefix := make([]int32, int(pre)%4, 8)
		got, gn, gok := appendIDs(slices.Clone(prefix), v)
		want, wn, wok := appendIDsSlow(slices.Clone(prefix), v)
		if gok != wok || gn != wn || !slices.Equal(got, want) {
			t.Fatalf("appendIDs(%q) = %v, %d, %v; each element read as a value gives %v, %d, %v", b, got, gn, gok, want, wn, wok)
		}
	})
}

// TestAppendIDsInvalid: an array that is not JSON ends the walk (it used to
// loop forever on a byte that starts no value).
func TestAppendIDsInvalid(t *testing.T) {
	for _, s := range []string{"[A", "[1,A]", "[1 A", "[}"} {
		if ids, n, ok := appendIDs(nil, valOf([]byte(s))); ok || n != 0 || len(ids) != 0 {
			t.Errorf("appendIDs(%q) = %v, %d, %v; want nothing", s, ids, n, ok)
		}
	}
}

// BenchmarkAppendIDs reads a prompt's 4,000 token ids, as a vLLM stream's
// first chunk carries them.
func BenchmarkAppendIDs(b *testing.B) {
	raw := []byte{'['}
	for i := range 4000 {
		if i > 0 {
			raw = append(raw, ',')
		}
		raw = strconv.AppendInt(raw, int64(i*37%151936), 10)
	}
	raw = append(raw, ']')
	v := valOf(raw)
	b.SetBytes(int64(len(raw)))
	for _, bc := range []struct {
		name string
		fn   func([]int32, val) ([]int32, int, bool)
	}{{"fast", appendIDs}, {"each-value", appendIDsSlow}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, n, ok := bc.fn(nil, v); !ok || n != 4000 {
					b.Fatal(n, ok)
				}
			}
		})
	}
}

// FuzzPlainIntsEnd: where appendPlainInts reads an array at the start of
// any bytes, the array is valid JSON ending where it says, as
// jsonscan.ValidMembersWith requires of what it is handed.
func FuzzPlainIntsEnd(f *testing.F) {
	for _, s := range []string{"[]", "[1,2,3]}", "[ 0 , 151644 ] ,", "[2147483647]x", "[01]", "[1,]", "[1 2]", "[1,2", "[3]]",
		"[1,22,333,4444,55555,666666,7777777,88888888]", "[1,2,3,4,5,6,7,8,9,]", "[1,2,3,4,5,6,7,8,01]", "[10,20,30,40,50]x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != '[' {
			return
		}
		_, end, ok := appendPlainInts(nil, b)
		if !ok {
			return
		}
		if vend, vok := jsonscan.ValidValue(b, 0); !vok || vend != end {
			t.Fatalf("%q: appendPlainInts read an array ending at %d, ValidValue says %d, %v", b, end, vend, vok)
		}
	})
}

// TestPromptIDsRead: the prompt ids read while the chunk is validated are
// the ones the member holds, and whatever that fast read declines (spaces
// it cannot take, an escaped key, an id past int32, a chunk invalid after
// the ids) comes out as it did before.
func TestPromptIDsRead(t *testing.T) {
	for _, tc := range []struct {
		chunk string
		want  []int32 // nil: no prompt ids
	}{
		{`{"id":"a","choices":[],"prompt_token_ids":[5,6,7]}`, []int32{5, 6, 7}},
		{`{"id":"a","choices":[],"prompt_token_ids":[ 5 , 6 ]}`, []int32{5, 6}},
		{`{"id":"a","choices":[],"prompt_token_ids":[]}`, []int32{}},
		{`{"id":"a","prompt_token_ids":[1],"prompt_token_ids":[2]}`, []int32{1}},
		{`{"id":"a","prompt\u005ftoken_ids":[8,9]}`, []int32{8, 9}},
		{`{"id":"a","prompt_token_ids":[2147483648]}`, nil},
		{`{"id":"a","prompt_token_ids":[-1,2]}`, []int32{-1, 2}},
		{`{"id":"a","prompt_token_ids":[3,4],"x":tru}`, nil},
		{`{"id":"a","prompt_token_ids":null}`, nil},
	} {
		s, err := NewStreamer(recorder.APIChatCompletions)
		if err != nil {
			t.Fatal(err)
		}
		s.Write([]byte("data: " + tc.chunk + "\n\ndata: [DONE]\n\n"))
		r := s.Result()
		var got []int32
		if r.Tokens != nil {
			got = r.Tokens.PromptIDs
		}
		if (got == nil) != (tc.want == nil) || !slices.Equal(got, tc.want) {
			t.Errorf("%s: prompt ids %v, want %v", tc.chunk, got, tc.want)
		}
	}
}
