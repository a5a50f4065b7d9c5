package lineage

import (
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// TestUnits: the output of a call and its echo in the next request have
// the same units however the harness re-wrote them (key order, ids,
// content form, reasoning), and differ from the other items.
func TestUnits(t *testing.T) {
	tests := []struct {
		api, resp, next string
		want            []bool // per prompt item of next: does it equal out[k], in order
	}{
		{recorder.APIChatCompletions,
			`{"choices":[{"index":1,"message":{"role":"assistant","content":"no"}},{"index":0,"message":{"role":"assistant","content":"hi","reasoning_content":"r"}}]}`,
			`{"messages":[{"role":"user","content":"q"},{"content":[{"type":"text","text":"hi"}],"role":"assistant"}]}`,
			[]bool{false, true}},
		{recorder.APIResponses,
			`{"output":[{"type":"reasoning","id":"rs_1"},{"type":"function_call","id":"fc_1","call_id":"c1","name":"f","arguments":"{\"a\": 1}"}]}`,
			`{"input":[{"role":"user","content":"q"},{"type":"reasoning","id":"rs_1"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"}]}`,
			[]bool{false, false, true}},
		{recorder.APIMessages,
			`{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"hi"}]}`,
			`{"system":"s","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"hi"}]}`,
			[]bool{false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.api, func(t *testing.T) {
			_, out, ok := Units(tt.api, []byte(`{}`), []byte(tt.resp))
			if !ok || len(out) != 1 {
				t.Fatalf("Units(response) = %v, %v; want one unit", out, ok)
			}
			prompt, _, ok := Units(tt.api, []byte(tt.next), nil)
			if !ok || len(prompt) != len(tt.want) {
				t.Fatalf("Units(request) = %v, %v; want %d units", prompt, ok, len(tt.want))
			}
			for i, w := range tt.want {
				if got := prompt[i] == out[0]; got != w {
					t.Errorf("prompt unit %d equals the output: %v, want %v", i, got, w)
				}
			}
		})
	}
}

// TestUnitsReasoningItem: a reasoning input item makes no unit (0), and
// APIs without messages, or requests that are not objects, have none.
func TestUnitsReasoningItem(t *testing.T) {
	prompt, _, _ := Units(recorder.APIResponses, []byte(`{"input":[{"type":"reasoning"},"x"]}`), nil)
	if len(prompt) != 2 || prompt[0] != 0 || prompt[1] == 0 {
		t.Errorf("prompt units = %v, want [0, nonzero]", prompt)
	}
	if s, _, _ := Units(recorder.APIResponses, []byte(`{"input":"hi"}`), nil); len(s) != 1 || s[0] == 0 {
		t.Errorf("string input units = %v, want one", s)
	}
	for _, c := range [][2]string{{recorder.APICompletions, `{"prompt":"p"}`}, {recorder.APIChatCompletions, `[]`}} {
		if _, _, ok := Units(c[0], []byte(c[1]), nil); ok {
			t.Errorf("Units(%s, %s) ok, want not", c[0], c[1])
		}
	}
}
