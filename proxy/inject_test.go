package proxy_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/recorder"
)

// TestTokenInjection: against a vLLM (or SGLang) upstream the proxy asks
// for token ids and logprobs the client did not ask for, records them
// exactly, and the client still gets byte for byte what the upstream sends
// without injection.
func TestTokenInjection(t *testing.T) {
	e := newEnv(t, func(o *proxy.Options) {
		o.Upstream.Kind = proxy.KindVLLM
		o.Routes = map[string]*proxy.Upstream{"sglang-tools": {BaseURL: o.Upstream.BaseURL, Kind: proxy.KindSGLang}}
	})
	type tc struct {
		api          recorder.API
		path, script string
		body         map[string]any
	}
	var cases []tc
	for _, script := range []string{"text", "tools", "sglang-tools"} {
		cases = append(cases, tc{recorder.APIChatCompletions, "/chat/completions", script, map[string]any{"model": script,
			"messages": []any{map[string]any{"role": "user", "content": "What is the weather?"}}, "tools": []any{weatherTool}}})
	}
	cases = append(cases,
		tc{recorder.APICompletions, "/completions", "text", map[string]any{"model": "text", "prompt": "Once"}},
		tc{recorder.APIChatCompletions, "/chat/completions", "text", map[string]any{"model": "text", "logprobs": true, "top_logprobs": 2,
			"messages": []any{map[string]any{"role": "user", "content": "asks for its own logprobs"}}}})
	for i, c := range cases {
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("%d-%s/%s/stream=%v", i, c.api, c.script, stream)
			t.Run(name, func(t *testing.T) {
				req := clone(c.body)
				req["stream"] = stream
				body := mustJSON(t, req)
				direct := do(t, "POST", e.Up.URL()+"/v1"+c.path, nil, body)
				via := do(t, "POST", e.Proxy.URL+"/e/ep-tok/v1"+c.path, map[string]string{"User-Agent": name}, body)
				if via.Err != nil || via.Status != 200 || direct.Status != 200 {
					t.Fatalf("via %d %v, direct %d", via.Status, via.Err, direct.Status)
				}
				if !bytes.Equal(via.Body, direct.Body) {
					t.Fatalf("client bytes differ from the upstream's without injection:\nvia:    %q\ndirect: %q", via.Body, direct.Body)
				}
				if via.Header.Get("Content-Length") != direct.Header.Get("Content-Length") {
					t.Errorf("Content-Length %q, want %q", via.Header.Get("Content-Length"), direct.Header.Get("Content-Length"))
				}
				rec := e.Sink.ForHarness(t, name)
				// What the engine returns when asked, without streaming.
				full := clone(c.body)
				full["return_token_ids"] = true
				if c.api == recorder.APICompletions {
					full["logprobs"] = 1
				} else {
					full["logprobs"] = true
				}
				want := do(t, "POST", e.Up.URL()+"/v1"+c.path, nil, mustJSON(t, full))
				sglangStream := c.script == "sglang-tools" && stream
				if sglangStream {
					if rec.Tokens != nil && len(rec.Tokens.CompletionIDs) > 0 {
						t.Errorf("sglang stream: ids recorded though none can be asked for")
					}
					return
				}
				if rec.Tokens == nil {
					t.Fatalf("no tokens recorded; injected %v", rec.Injected)
				}
				wantPrompt := int64s(gjson.GetBytes(want.Body, "prompt_token_ids"))
				if wantPrompt == nil {
					wantPrompt = int64s(gjson.GetBytes(want.Body, "choices.0.prompt_token_ids"))
				}
				wantIDs := int64s(gjson.GetBytes(want.Body, "choices.0.token_ids"))
				if !slices.Equal(rec.Tokens.PromptIDs, wantPrompt) || !slices.Equal(rec.Tokens.CompletionIDs, wantIDs) {
					t.Fatalf("tokens %v + %v, want %v + %v", rec.Tokens.PromptIDs, rec.Tokens.CompletionIDs, wantPrompt, wantIDs)
				}
				if len(rec.Tokens.Logprobs) != len(wantIDs) || rec.Tokens.Mismatch != "" {
					t.Fatalf("%d logprobs for %d ids (mismatch %q)", len(rec.Tokens.Logprobs), len(wantIDs), rec.Tokens.Mismatch)
				}
			})
		}
	}
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+3)
	for k, v := range m {
		out[k] = v
	}
	return out
}
