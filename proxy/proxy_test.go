package proxy_test

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/recorder"
)

// apiCase is one recorded API: its path and a request body for a script.
type apiCase struct {
	api  recorder.API
	path string
	body func(script string, stream bool) map[string]any
}

var apiCases = []apiCase{
	{recorder.APIChatCompletions, "/chat/completions", func(s string, stream bool) map[string]any {
		return map[string]any{"model": s, "stream": stream, "return_token_ids": true,
			"messages": []any{map[string]any{"role": "user", "content": "What is the weather?"}},
			"tools":    []any{weatherTool}}
	}},
	{recorder.APICompletions, "/completions", func(s string, stream bool) map[string]any {
		return map[string]any{"model": s, "stream": stream, "return_token_ids": true, "prompt": "Once upon a time"}
	}},
	{recorder.APIResponses, "/responses", func(s string, stream bool) map[string]any {
		return map[string]any{"model": s, "stream": stream, "input": "What is the weather?",
			"tools": []any{map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}}}}
	}},
	{recorder.APIMessages, "/messages", func(s string, stream bool) map[string]any {
		return map[string]any{"model": s, "stream": stream, "max_tokens": 1024,
			"messages": []any{map[string]any{"role": "user", "content": "What is the weather?"}},
			"tools":    []any{map[string]any{"name": "get_weather", "input_schema": map[string]any{"type": "object"}}}}
	}},
}

var weatherTool = map[string]any{"type": "function", "function": map[string]any{
	"name": "get_weather", "parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}

// TestByteIdentity is the capture path's contract: for every recorded API,
// streaming or not, the client gets exactly the upstream's bytes through the
// proxy, and the record holds the response the non-streaming API returns
// for the client's request (without the fields the proxy injected), with
// the engine's token ids from the request the proxy sent.
func TestByteIdentity(t *testing.T) {
	e := newEnv(t, func(o *proxy.Options) {
		o.Upstream.Kind = "vllm"
		o.Routes = map[string]*proxy.Upstream{"openai-tools": {BaseURL: o.Upstream.BaseURL, Kind: "openai"}}
	})
	for _, ac := range apiCases {
		for _, script := range []string{"text", "reasoning", "tools", "openai-tools"} {
			if ac.api == recorder.APICompletions && script != "text" {
				continue // completions have no tools or reasoning
			}
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/stream=%v", ac.api, script, stream)
				t.Run(name, func(t *testing.T) {
					body := mustJSON(t, ac.body(script, stream))
					direct := do(t, "POST", e.Up.URL()+"/v1"+ac.path, nil, body)
					ua := "byte-test/" + name
					via := do(t, "POST", e.Proxy.URL+"/e/ep-bytes/v1"+ac.path, map[string]string{"User-Agent": ua}, body)
					if direct.Err != nil || via.Err != nil {
						t.Fatalf("direct err %v, via err %v", direct.Err, via.Err)
					}
					if via.Status != direct.Status || via.Status != http.StatusOK {
						t.Fatalf("status via proxy %d, direct %d", via.Status, direct.Status)
					}
					if !bytes.Equal(via.Body, direct.Body) {
						t.Fatalf("body via proxy differs from direct:\nvia:    %q\ndirect: %q", via.Body, direct.Body)
					}
					c := e.Sink.ForHarness(t, ua)
					if c.EpisodeID != "ep-bytes" || c.API != ac.api || c.Model != script || c.Stream != stream ||
						c.Status != 200 || c.EndReason != recorder.EndDone {
						t.Fatalf("record = episode %q api %q model %q stream %v status %d end %q harness %q",
							c.EpisodeID, c.API, c.Model, c.Stream, c.Status, c.EndReason, c.Harness)
					}
					if !jsonEqual(t, c.Request, body) {
						t.Errorf("recorded request differs from the one sent")
					}
					want := do(t, "POST", e.Up.URL()+"/v1"+ac.path, nil, nonStreaming(t, body))
					if !jsonEqual(t, c.Response, want.Body) {
						t.Errorf("recorded response:\n%s\nnon-streaming response:\n%s", c.Response, want.Body)
					}
					proxied := do(t, "POST", e.Up.URL()+"/v1"+ac.path, nil, e.AsProxied(t, ua))
					checkTokens(t, ac.api, c, proxied.Body)
				})
			}
		}
	}
}

// nonStreaming is a request body asking for the same generation without
// streaming.
func nonStreaming(t *testing.T, body []byte) []byte {
	t.Helper()
	b, err := sjson.DeleteBytes(body, "stream_options")
	if err == nil {
		b, err = sjson.SetBytes(b, "stream", false)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkTokens compares recorded ids with the ones the engine returned in
// the non-streaming response.
func checkTokens(t *testing.T, api recorder.API, c *recorder.Call, nonStream []byte) {
	t.Helper()
	prompt := gjson.GetBytes(nonStream, "prompt_token_ids")
	if api != recorder.APIChatCompletions && api != recorder.APICompletions || !prompt.Exists() {
		return
	}
	if c.Tokens == nil {
		t.Fatal("record has no tokens; the upstream returned ids")
	}
	wantPrompt := int64s(prompt)
	wantCompl := int64s(gjson.GetBytes(nonStream, "choices.0.token_ids"))
	if !slices.Equal(c.Tokens.PromptIDs, wantPrompt) || !slices.Equal(c.Tokens.CompletionIDs, wantCompl) {
		t.Errorf("tokens = %v + %v, want %v + %v", c.Tokens.PromptIDs, c.Tokens.CompletionIDs, wantPrompt, wantCompl)
	}
}

// int64s reads a JSON array of token ids, as int32 like recorder.Tokens
// (the name predates the narrowing; inject_test.go calls it too).
func int64s(r gjson.Result) []int32 {
	var out []int32
	for _, v := range r.Array() {
		out = append(out, int32(v.Int()))
	}
	return out
}
