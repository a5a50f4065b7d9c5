package assemble_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
)

var fuzzAPIs = []recorder.API{recorder.APIChatCompletions, recorder.APICompletions, recorder.APIResponses, recorder.APIMessages}

// FuzzStream feeds arbitrary bodies to every API's assembler: it must never
// panic, must return valid JSON, and its ids must never be misaligned with
// its logprobs.
func FuzzStream(f *testing.F) {
	f.Add(uint8(0), []byte(`data: {"choices":[{"index":0,"delta":{"content":"a","tool_calls":[{"index":0,"function":{"arguments":"{"}}]},"logprobs":{"content":[{"logprob":-1}]},"token_ids":[1]}],"prompt_token_ids":[2]}`+"\n\ndata: [DONE]\n\n"))
	f.Add(uint8(1), []byte(`data: {"choices":[{"index":3,"text":"a","logprobs":{"token_logprobs":[null,1]},"token_ids":[1,"x"]}]}`+"\n\n"))
	f.Add(uint8(2), []byte("event: response.output_text.delta\ndata: {\"output_index\":1,\"content_index\":0,\"delta\":\"x\"}\n\n"))
	f.Add(uint8(3), []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n"))
	f.Add(uint8(0), []byte(`data: {"choices":[{"index":-1,"delta":null}],"sglext":{"output_ids":[[1],[2,3]],"input_ids":[]}}`+"\n\n"))
	f.Fuzz(func(t *testing.T, api uint8, body []byte) {
		r := assemble.Stream(fuzzAPIs[int(api)%len(fuzzAPIs)], body)
		// The same body in pieces (cut where the body's own bytes say)
		// must assemble to the same result.
		if p := inPieces(t, fuzzAPIs[int(api)%len(fuzzAPIs)], body); !reflect.DeepEqual(p, r) {
			t.Fatalf("in pieces:\n%+v\nwhole:\n%+v", p, r)
		}
		if r.Response != nil && !json.Valid(r.Response) {
			t.Fatalf("invalid response JSON %q", r.Response)
		}
		if r.Usage != nil && !json.Valid(r.Usage) {
			t.Fatalf("invalid usage JSON %q", r.Usage)
		}
		checkAligned(t, r.Tokens)
		// Hiding the token members leaves the tokens and a valid response.
		s, _ := assemble.NewStreamer(fuzzAPIs[int(api)%len(fuzzAPIs)])
		s.Hide([]assemble.Unseen{{Name: "logprobs", PerChoice: true}, {Name: "token_ids", PerChoice: true, Remove: api&0x80 != 0},
			{Name: "prompt_token_ids", PerChoice: api&0x40 != 0}})
		s.Write(body)
		if h := s.Result(); !reflect.DeepEqual(h.Tokens, r.Tokens) || (h.Response != nil && !json.Valid(h.Response)) {
			t.Fatalf("hidden: tokens %+v (want %+v), response %q", h.Tokens, r.Tokens, h.Response)
		}
		j := assemble.JSON(fuzzAPIs[int(api)%len(fuzzAPIs)], body)
		if !json.Valid(j.Response) {
			t.Fatalf("JSON: invalid response %q", j.Response)
		}
		checkAligned(t, j.Tokens)
	})
}

// inPieces feeds body to a Streamer cut after every byte whose value is
// below 16 (so the fuzzer controls the cuts).
func inPieces(t *testing.T, api recorder.API, body []byte) assemble.Result {
	s, err := assemble.NewStreamer(api)
	if err != nil {
		t.Fatal(err)
	}
	last := 0
	for i, c := range body {
		if c < 16 {
			s.Write(body[last : i+1])
			last = i + 1
		}
	}
	s.Write(body[last:])
	return s.Result()
}

func checkAligned(t *testing.T, tk *recorder.Tokens) {
	t.Helper()
	if tk == nil {
		return
	}
	if tk.PromptIDs == nil || tk.CompletionIDs == nil {
		t.Fatalf("nil id lists in %+v", tk)
	}
	if len(tk.Logprobs) != 0 && len(tk.Logprobs) != len(tk.CompletionIDs) {
		t.Fatalf("%d logprobs for %d ids", len(tk.Logprobs), len(tk.CompletionIDs))
	}
	for _, c := range tk.Choices {
		if len(c.Logprobs) != 0 && len(c.Logprobs) != len(c.CompletionIDs) {
			t.Fatalf("choice %d: %d logprobs for %d ids", c.Index, len(c.Logprobs), len(c.CompletionIDs))
		}
	}
	if _, err := json.Marshal(tk); err != nil {
		t.Fatalf("tokens do not marshal: %v", err)
	}
}

func TestHugeLogprob(t *testing.T) {
	t.Parallel()
	r := assemble.Stream(recorder.APIChatCompletions, []byte(`data: {"choices":[{"index":0,"delta":{},"logprobs":{"content":[{"logprob":1e999}]},"token_ids":[1]}]}`+"\n\n"))
	checkAligned(t, r.Tokens)
	if r.Tokens.Logprobs[0] != -9999 {
		t.Fatalf("logprob %v, want -9999", r.Tokens.Logprobs[0])
	}
}
