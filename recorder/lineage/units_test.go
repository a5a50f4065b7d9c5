package lineage

import (
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// TestItems: the output of a call and its echo in the next request have
// the same unit however the harness re-wrote it (key order, ids, content
// form, reasoning), and a different one from the other items; each item's
// Raw is its JSON within the request.
func TestItems(t *testing.T) {
	tests := []struct {
		api        recorder.API
		resp, next string
		raws       []string // Raw of each item of next
		echo       int      // the item of next that echoes resp's output
	}{
		{recorder.APIChatCompletions,
			`{"choices":[{"index":1,"message":{"role":"assistant","content":"no"}},{"index":0,"message":{"role":"assistant","content":"hi","reasoning_content":"r"}}]}`,
			`{"messages":[{"role":"user","content":"q"}, {"content":[{"type":"text","text":"hi"}],"role":"assistant"}]}`,
			[]string{`{"role":"user","content":"q"}`, `{"content":[{"type":"text","text":"hi"}],"role":"assistant"}`}, 1},
		{recorder.APIResponses,
			`{"output":[{"type":"reasoning","id":"rs_1"},{"type":"function_call","id":"fc_1","call_id":"c1","name":"f","arguments":"{\"a\": 1}"}]}`,
			`{"input":[{"role":"user","content":"q"},{"type":"reasoning","id":"rs_1"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"}]}`,
			[]string{`{"role":"user","content":"q"}`, `{"type":"reasoning","id":"rs_1"}`, `{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"}`}, 2},
		{recorder.APIMessages,
			`{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"hi"}]}`,
			`{"system":"s","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"hi"}]}`,
			[]string{`{"role":"user","content":"q"}`, `{"role":"assistant","content":"hi"}`}, 1},
	}
	for _, tt := range tests {
		t.Run(string(tt.api), func(t *testing.T) {
			out := Output(tt.api, []byte(tt.resp))
			if len(out) != 1 {
				t.Fatalf("Output = %v, want one unit", out)
			}
			next := []byte(tt.next)
			items, ok := Items(tt.api, next)
			if !ok || len(items) != len(tt.raws) {
				t.Fatalf("Items = %d items, %v; want %d", len(items), ok, len(tt.raws))
			}
			for i, it := range items {
				if !sharesMemory(it.Raw, next) {
					t.Errorf("item %d Raw is a copy, want it within the request", i)
				}
				if string(it.Raw) != tt.raws[i] {
					t.Errorf("item %d Raw = %s, want %s", i, it.Raw, tt.raws[i])
				}
				if echo := it.Unit == out[0]; echo != (i == tt.echo) {
					t.Errorf("item %d has the output's unit: %v, want %v", i, echo, i == tt.echo)
				}
			}
		})
	}
}

// TestItemsWithoutUnits: a reasoning input item makes no unit (0), a
// string input is one item, and APIs without messages, or requests that
// are not objects, have no items.
func TestItemsWithoutUnits(t *testing.T) {
	items, _ := Items(recorder.APIResponses, []byte(`{"input":[{"type":"reasoning"},"x"]}`))
	if len(items) != 2 || items[0].Unit != 0 || items[1].Unit == 0 {
		t.Errorf("items = %+v, want units [0, nonzero]", items)
	}
	if s, _ := Items(recorder.APIResponses, []byte(`{"input":"hi"}`)); len(s) != 1 || s[0].Unit == 0 || string(s[0].Raw) != `"hi"` {
		t.Errorf("string input items = %+v, want one", s)
	}
	for _, c := range []struct {
		api recorder.API
		req string
	}{{recorder.APICompletions, `{"prompt":"p"}`}, {recorder.APIChatCompletions, `[]`}} {
		if _, ok := Items(c.api, []byte(c.req)); ok {
			t.Errorf("Items(%s, %s) ok, want not", c.api, c.req)
		}
	}
}

// sharesMemory reports whether sub lies within b.
func sharesMemory(sub, b []byte) bool {
	for i := range len(b) - len(sub) + 1 {
		if len(sub) > 0 && &b[i] == &sub[0] {
			return true
		}
	}
	return false
}

// TestHeaderMemo: the header unit (tools and what else a request keeps
// outside its messages) comes from the memo for the same bytes, and
// differs when any of its parts differs, or when bytes move from one part
// to the other.
func TestHeaderMemo(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		api recorder.API
		req string
	}{
		{recorder.APIChatCompletions, `{"tools":[{"type":"function","function":{"name":"a"}}],` + msgs + `}`},
		{recorder.APIChatCompletions, `{"tools":[{"type":"function","function":{"name":"b"}}],` + msgs + `}`},
		{recorder.APIChatCompletions, `{"tools":[{"type":"function","function":{"name":"a"}}],"functions":[{"name":"f"}],` + msgs + `}`},
		{recorder.APIMessages, `{"tools":[{"name":"a"}],"system":"s",` + msgs + `}`},
		{recorder.APIMessages, `{"tools":[{"name":"a"}],"system":"t",` + msgs + `}`},
		{recorder.APIResponses, `{"tools":[{"type":"function","name":"a"}],"instructions":"s","input":"hi"}`},
		{recorder.APIResponses, `{"tools":[{"type":"function","name":"a"}],"instructions":"ss","input":"hi"}`},
	}
	seen := map[uint64]int{}
	for i, tc := range tests {
		var in seqInput[uint64]
		x := extractor{in: &in, memo: map[uint64]uint64{}}
		var want uint64
		memoWant := 2 // the header and the one message
		if tc.api == recorder.APIResponses {
			memoWant = 1 // a string input is not memoised
		}
		for round := range 2 {
			in.reset()
			if _, ok := x.extract(tc.api, []byte(tc.req), nil); !ok || len(in.prompt) == 0 {
				t.Fatalf("%d: extract failed", i)
			}
			if len(x.memo) != memoWant {
				t.Errorf("%d round %d: %d memo entries, want %d", i, round, len(x.memo), memoWant)
			}
			fresh := extractor{in: &seqInput[uint64]{}, memo: map[uint64]uint64{}, gjsonOnly: true}
			fresh.extract(tc.api, []byte(tc.req), nil)
			if in.prompt[0] != fresh.in.prompt[0] {
				t.Errorf("%d round %d: header %x, want %x as computed afresh", i, round, in.prompt[0], fresh.in.prompt[0])
			}
			if round == 0 {
				want = in.prompt[0]
				continue
			}
			if in.prompt[0] != want {
				t.Errorf("%d: the second extract changed the header (%x, %x)", i, want, in.prompt[0])
			}
		}
		if j, dup := seen[want]; dup {
			t.Errorf("requests %d and %d have the same header unit", j, i)
		}
		seen[want] = i
	}
}
