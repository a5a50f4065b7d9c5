package assemble_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/internal/sse"
	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
)

// events splits a body into its raw events.
func events(body []byte) [][]byte {
	f := sse.NewFramer(0)
	f.Write(body)
	var out [][]byte
	for ev := f.Next(); ev != nil; ev = f.Next() {
		out = append(out, bytes.Clone(ev))
	}
	return out
}

// TestStreamCut cuts every recorded stream after each event and mid-event:
// assembly must yield valid JSON, Done only once the terminal event is in,
// and token ids that are a prefix of the full stream's.
func TestStreamCut(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(llmtest.Options{})
	defer srv.Close()
	for _, tc := range roundTrips {
		t.Run(tc.name, func(t *testing.T) {
			body := post(t, srv, tc.path, streamBody(tc.api, tc.body))
			full := assemble.Stream(tc.api, body)
			evs := events(body)
			var prefix []byte
			for i, ev := range evs {
				half := append(bytes.Clone(prefix), ev[:len(ev)/2]...)
				prefix = append(prefix, ev...)
				for _, cut := range [][]byte{half, prefix} {
					got := assemble.Stream(tc.api, cut)
					if got.Response != nil && !json.Valid(got.Response) {
						t.Fatalf("event %d: invalid JSON %s", i, got.Response)
					}
					terminal := i == len(evs)-1 && len(cut) == len(body)
					if tc.api == recorder.APIChatCompletions || tc.api == recorder.APICompletions {
						terminal = bytes.HasSuffix(cut, []byte("data: [DONE]\n\n"))
					}
					if got.Done != terminal && !(got.Done && len(cut) == len(body)) {
						t.Fatalf("event %d (%d bytes): Done = %v, want %v", i, len(cut), got.Done, terminal)
					}
					checkPrefix(t, got.Tokens, full.Tokens)
				}
			}
		})
	}
}

func checkPrefix(t *testing.T, got, full *recorder.Tokens) {
	t.Helper()
	if got == nil {
		return
	}
	if full == nil || len(got.CompletionIDs) > len(full.CompletionIDs) {
		t.Fatalf("tokens %+v not a prefix of %+v", got, full)
	}
	for i, id := range got.CompletionIDs {
		if full.CompletionIDs[i] != id {
			t.Fatalf("id %d = %d, want %d", i, id, full.CompletionIDs[i])
		}
	}
	if len(got.Logprobs) != 0 && len(got.Logprobs) != len(got.CompletionIDs) {
		t.Fatalf("%d logprobs for %d ids", len(got.Logprobs), len(got.CompletionIDs))
	}
}

// TestResponsesRebuild drops the terminal event so the output must be rebuilt
// from the item events; it must equal the completed response's output.
func TestResponsesRebuild(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(llmtest.Options{})
	defer srv.Close()
	for _, model := range []string{"text", "reasoning", "tools", "redacted"} {
		t.Run(model, func(t *testing.T) {
			body := post(t, srv, "/v1/responses",
				`{"model":"`+model+`","input":"x","include":["reasoning.encrypted_content"],"stream":true}`)
			evs := events(body)
			full := assemble.Stream(recorder.APIResponses, body)
			cut := assemble.Stream(recorder.APIResponses, bytes.Join(evs[:len(evs)-1], nil))
			if cut.Done || !full.Done {
				t.Fatalf("Done: cut %v full %v", cut.Done, full.Done)
			}
			var fv, cv map[string]any
			json.Unmarshal(full.Response, &fv)
			json.Unmarshal(cut.Response, &cv)
			if !jsonEqual(t, mustJSON(t, cv["output"]), mustJSON(t, fv["output"])) {
				t.Errorf("rebuilt output\n%s\nwant\n%s", mustJSON(t, cv["output"]), mustJSON(t, fv["output"]))
			}
			if cv["status"] != "in_progress" {
				t.Errorf("status %v, want in_progress", cv["status"])
			}
			// Also rebuild items still open: drop every output_item.done.
			var open [][]byte
			for _, ev := range evs[:len(evs)-1] {
				if !bytes.Contains(ev, []byte("event: response.output_item.done")) {
					open = append(open, ev)
				}
			}
			op := assemble.Stream(recorder.APIResponses, bytes.Join(open, nil))
			var ov map[string]any
			json.Unmarshal(op.Response, &ov)
			if got, want := texts(ov["output"]), texts(fv["output"]); got != want {
				t.Errorf("open items text %q, want %q", got, want)
			}
		})
	}
}

// texts concatenates every string value under the "text" and "arguments"
// keys, an order-insensitive digest of the visible output.
func texts(v any) string {
	var out string
	switch v := v.(type) {
	case map[string]any:
		for _, k := range []string{"type", "text", "arguments", "content", "summary"} {
			if s, ok := v[k].(string); ok && k != "type" {
				out += s + "|"
			} else if k != "type" {
				out += texts(v[k])
			}
		}
	case []any:
		for _, e := range v {
			out += texts(e)
		}
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
