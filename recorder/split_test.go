package recorder

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

var splitSeeds = []string{
	`{"messages":[{"a":1}, {"b":2}],"tools":[1,2],"system":"` + string(bytes.Repeat([]byte("x"), 70)) + `"}`,
	`{"input":[ 1 ,2 ]}`, `  { "input" : [ 1 , 2 , 3 ] , "x" : 1 }  `, `{"input":[1, 2,3]}`, `{"input":[]}`, `{"input":[ ]}`,
	`{"messages":[1],"messages":[2]}`, `{"system":"short"}`, `{"system":{"a":"` + string(bytes.Repeat([]byte("y"), 80)) + `"}}`,
	`{"prompt_token_ids":[1,2,3],"choices":[{"a":1}]}`, `{"prompt_token_ids":[1,2,3 ]}`, `{"prompt_token_ids":[1,2]}`,
	`{"prompt_token_ids":[1,2,3],"prompt_token_ids":[1,2,3]}`, `{"choices":[{"s":"a\"]b"},"\\"]}`, `{}`, ` {} `, `[]`, `not json`,
	`{"a":1 "b":2}`, `{"messages":[1,]}`, `{"messages":[1,2]} x`, `{"mess\u0061ges":[1,2]}`, `{"messages":"` + "\x00\xff" + `"}`,
	`{"sglext":{"input_ids":[1,2,3],"output_ids":[[4]]}}`, `{"messages":[{"a":[1,{"b":"}"}]}],"tools":true,"choices":null}`,
}

// TestSplitFastAgrees checks that splitFast, wherever it decides, cuts what
// splitGJSON cuts.
func TestSplitFastAgrees(t *testing.T) {
	var bodies [][]byte
	for _, s := range splitSeeds {
		bodies = append(bodies, []byte(s))
	}
	for _, calls := range [][]*Call{vllmEpisode(4), growingEpisode(4, 300)} {
		for _, c := range calls {
			bodies = append(bodies, c.Request, c.Response)
		}
	}
	for _, body := range bodies {
		if json.Valid(body) {
			checkSplitAgrees(t, body)
		}
		checkSplitJoins(t, body)
	}
}

// materialized is s with its skeleton as bytes of its own, as splitGJSON
// and parseLayout give it.
func materialized(s split) split {
	if s.src != nil {
		s.skeleton, s.src, s.spans = s.appendSkeleton(nil), nil, nil
	}
	return s
}

// choiceKeys cuts a chat response's choices, which the store no longer
// does: the splitting code still cuts whatever keys it is given.
var choiceKeys = map[string]bool{"choices": true}

func checkSplitAgrees(t *testing.T, body []byte) {
	t.Helper()
	prompt := testCall("ep", "1", 1).Tokens.PromptIDs
	for _, keys := range []map[string]bool{requestKeys, choiceKeys, outputKeys, contentKeys, nil} {
		for _, p := range [][]int32{nil, prompt} {
			fs, fok, done := splitFast(body, keys, p)
			if !done {
				continue
			}
			gs, gok := splitGJSON(body, keys, p)
			fs = materialized(fs)
			if fok != gok || !reflect.DeepEqual(fs, gs) {
				t.Fatalf("%q keys %v prompt %v: splitFast %v %+v, splitGJSON %v %+v", body, keys, p, fok, fs, gok, gs)
			}
		}
	}
}

// FuzzSplitFast holds splitFast to splitGJSON on valid JSON, and to
// joining back byte for byte on anything.
func FuzzSplitFast(f *testing.F) {
	for _, s := range splitSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if json.Valid(body) {
			checkSplitAgrees(t, body)
		}
		checkSplitJoins(t, body)
	})
}

// checkSplitJoins checks that splitFast's pieces join back into body.
func checkSplitJoins(t *testing.T, body []byte) {
	t.Helper()
	prompt := testCall("ep", "1", 1).Tokens.PromptIDs
	for _, keys := range []map[string]bool{requestKeys, choiceKeys, outputKeys, contentKeys} {
		s, ok, _ := splitFast(body, keys, prompt)
		if !ok {
			continue
		}
		s = materialized(s)
		var out []byte
		prev := 0
		for _, fd := range s.fields {
			out = append(out, s.skeleton[prev:fd.hole]...)
			switch {
			case fd.ids:
				out = appendIDsJSON(out, prompt)
			case fd.whole:
				out = append(out, fd.data[0]...)
			default:
				out = joinArray(out, fd, fd.data)
			}
			prev = fd.hole
		}
		out = append(out, s.skeleton[prev:]...)
		if !bytes.Equal(out, body) {
			t.Fatalf("%q joins back as %q", body, out)
		}
	}
}

// TestLazyLayout: a large response's layout, written from the body into
// the document, gives the same bytes as the layout built apart.
func TestLazyLayout(t *testing.T) {
	lazy := 0
	for _, c := range vllmEpisode(4) {
		a := cutBody(c.Response, nil, c.Tokens.PromptIDs, true, true)
		b := cutBody(c.Response, nil, c.Tokens.PromptIDs, true, false)
		if a.kind != bodySplit || b.layout == nil {
			t.Fatalf("%s: kind %d, layout %d B: want a split", c.CallID, a.kind, len(b.layout))
		}
		if a.layout == nil {
			lazy++
		}
		var wa, wb wbuf
		a.appendTo(&wa)
		b.appendTo(&wb)
		if !bytes.Equal(wa.b, wb.b) {
			t.Fatalf("%s: the document's body written from the response differs from the built layout's", c.CallID)
		}
	}
	if lazy != 4 {
		t.Errorf("%d of 4 responses left their layout to the document, want 4", lazy)
	}
}

// TestCutArrayAllocs: cutting an array allocates its refs and data once,
// at their length, however many elements it has (up to the 32 whose
// extents are gathered on the stack).
func TestCutArrayAllocs(t *testing.T) {
	for _, n := range []int{1, 5, 16, 32} {
		elems := make([]string, n)
		for i := range elems {
			elems[i] = fmt.Sprintf(`{"role":"user","content":"message %d"}`, i)
		}
		body := []byte("[" + strings.Join(elems, ",") + "]")
		var f field
		allocs := testing.AllocsPerRun(50, func() {
			var ok bool
			if f, _, ok = cutArrayFast(body, 0); !ok {
				t.Fatal("not cut")
			}
		})
		if allocs != 2 || len(f.refs) != n || cap(f.refs) != n || cap(f.data) != n {
			t.Errorf("%d elements: %.1f allocations, refs %d/%d, data cap %d; want 2 and %d", n, allocs, len(f.refs), cap(f.refs), cap(f.data), n)
		}
		if got := string(body[:1]) + string(bytes.Join(f.data, f.sep)) + "]"; got != string(body) {
			t.Errorf("%d elements: blocks join to %q", n, got)
		}
	}
}
