package lineage

import (
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// units returns the message-level prompt and first output of a call.
func units(t *testing.T, api recorder.API, req, resp string) ([]uint64, []uint64) {
	t.Helper()
	var in seqInput[uint64]
	x := extractor{in: &in, memo: map[uint64]uint64{}}
	if _, ok := x.extract(api, []byte(req), []byte(resp)); !ok {
		t.Fatalf("extractMessages(%s, %s) = false", api, req)
	}
	var out []uint64
	if len(in.outs) > 0 {
		out = in.outs[0]
	}
	return in.prompt, out
}

func TestCanonicalEqual(t *testing.T) {
	tests := []struct {
		name string
		api  recorder.API
		a, b string
	}{
		{"key order and whitespace", recorder.APIChatCompletions,
			`{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"a":1,"b":2}}}]}`,
			`{ "tools" : [ {"function":{"parameters":{"b":2.0,"a":1e0},"name":"f"},"type":"function"} ], "messages":[{"content":"hi","role":"user"}]}`},
		{"escapes", recorder.APIChatCompletions,
			`{"messages":[{"role":"user","content":"<a>é"}]}`,
			`{"messages":[{"role":"user","content":"\u003ca\u003e\u00e9"}]}`},
		{"string content is one text part", recorder.APIChatCompletions,
			`{"messages":[{"role":"user","content":"hi"}]}`,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`},
		{"null, empty and missing content", recorder.APIChatCompletions,
			`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\": 1}"}}]}]}`,
			`{"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"x\":1}","name":"f"},"id":"c1"}],"content":""}]}`},
		{"response-only fields and reasoning", recorder.APIChatCompletions,
			`{"messages":[{"role":"assistant","content":"ok","refusal":null,"annotations":[],"reasoning_content":"hmm"}]}`,
			`{"messages":[{"role":"assistant","content":"ok"}]}`},
		{"cache_control anywhere", recorder.APIMessages,
			`{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r","cache_control":{"type":"ephemeral"}}]}]}`,
			`{"system":"s","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r"}],"is_error":false}]}]}`},
		{"thinking blocks", recorder.APIMessages,
			`{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"u","name":"n","input":{"b":1,"a":2}}]}]}`,
			`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"u","name":"n","input":{"a":2,"b":1},"caller":{"type":"direct"}}]}]}`},
		{"item ids, status, reasoning items", recorder.APIResponses,
			`{"input":[{"type":"reasoning","id":"rs","summary":[]},{"type":"function_call","id":"fc","status":"completed","call_id":"c","name":"n","arguments":"{}"},{"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[]}]}]}`,
			`{"input":[{"type":"function_call","call_id":"c","name":"n","arguments":""},{"role":"assistant","content":"x"}]}`},
		{"string input is a user message", recorder.APIResponses,
			`{"input":"hi"}`,
			`{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, _ := units(t, tt.api, tt.a, "")
			b, _ := units(t, tt.api, tt.b, "")
			if !equalUnits(a, b) {
				t.Errorf("units differ:\n%x\n%x", a, b)
			}
		})
	}
}

func TestCanonicalDifferent(t *testing.T) {
	tests := []struct {
		name string
		api  recorder.API
		a, b string
	}{
		{"text", recorder.APIChatCompletions,
			`{"messages":[{"role":"user","content":"hi"}]}`, `{"messages":[{"role":"user","content":"hi!"}]}`},
		{"role", recorder.APIChatCompletions,
			`{"messages":[{"role":"user","content":"hi"}]}`, `{"messages":[{"role":"system","content":"hi"}]}`},
		{"two parts are not one", recorder.APIChatCompletions,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`,
			`{"messages":[{"role":"user","content":"ab"}]}`},
		{"tool arguments", recorder.APIChatCompletions,
			`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"x\":1}"}}]}]}`,
			`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"x\":2}"}}]}]}`},
		{"tools", recorder.APIChatCompletions,
			`{"tools":[],"messages":[]}`, `{"tools":[{"type":"function"}],"messages":[]}`},
		{"tool error flag", recorder.APIMessages,
			`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}`,
			`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r","is_error":true}]}]}`},
		{"instructions", recorder.APIResponses, `{"instructions":"a","input":[]}`, `{"instructions":"b","input":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, _ := units(t, tt.api, tt.a, "")
			b, _ := units(t, tt.api, tt.b, "")
			if equalUnits(a, b) {
				t.Errorf("units are equal: %x", a)
			}
		})
	}
}

// TestOutputMatchesEcho: the output of a response equals the message a
// harness echoes back in the next request, for each API.
func TestOutputMatchesEcho(t *testing.T) {
	tests := []struct {
		name       string
		api        recorder.API
		resp, echo string
	}{
		{"chat", recorder.APIChatCompletions,
			`{"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]}}]}`,
			`{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}]}`},
		{"responses", recorder.APIResponses,
			`{"id":"r","output":[{"type":"reasoning","id":"rs","summary":[]},{"type":"message","id":"m","status":"completed","role":"assistant","phase":null,"content":[{"type":"output_text","text":"x","annotations":[]}]},{"type":"function_call","id":"fc","call_id":"c","name":"n","arguments":"{}","status":"completed"}]}`,
			`{"input":[{"role":"assistant","content":"x"},{"type":"function_call","call_id":"c","name":"n","arguments":"{}"}]}`},
		{"messages", recorder.APIMessages,
			`{"id":"m","type":"message","role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"x","citations":null},{"type":"tool_use","id":"u","name":"n","input":{},"caller":{"type":"direct"}}],"stop_reason":"tool_use"}`,
			`{"messages":[{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"u","name":"n","input":{}}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, out := units(t, tt.api, `{}`, tt.resp)
			echo, _ := units(t, tt.api, tt.echo, "")
			if !equalUnits(out, echo[1:]) {
				t.Errorf("output %x, echo %x", out, echo[1:])
			}
		})
	}
}

func equalUnits(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestExtractRejects(t *testing.T) {
	for _, req := range []string{``, `not json`, `[1,2]`, `"string"`} {
		var in seqInput[uint64]
		x := extractor{in: &in, memo: map[uint64]uint64{}}
		if _, ok := x.extract(recorder.APIChatCompletions, []byte(req), nil); ok {
			t.Errorf("extractMessages(%q) = true, want false", req)
		}
	}
	for _, req := range []string{`{"prompt":[1,2,3]}`, `{"prompt":["a","b"]}`, `{}`, `nope`} {
		var in seqInput[byte]
		if extractText([]byte(req), nil, &in) {
			t.Errorf("extractText(%q) = true, want false", req)
		}
	}
}
