package proxy_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/proxy/proxytest"
	"github.com/orchard-rl/orchard/recorder"
)

// fidelityRow is one client option (or combination) the proxy must not
// change the answer to, whatever it injects beside it.
type fidelityRow struct {
	name        string
	chat, compl map[string]any // request fields per API; nil: the row does not apply
	streamOnly  bool           // stream_options is refused without stream
	jsonOnly    bool           // vLLM refuses prompt_logprobs when streaming
}

func fidelityRows() []fidelityRow {
	both := func(m map[string]any) (map[string]any, map[string]any) { return m, m }
	row := func(name string, m map[string]any) fidelityRow {
		c, p := both(m)
		return fidelityRow{name: name, chat: c, compl: p}
	}
	so := func(o map[string]any) map[string]any { return map[string]any{"stream_options": o} }
	rows := []fidelityRow{
		row("plain", map[string]any{}),
		row("n=2", map[string]any{"n": 2}),
		row("client asks for token ids", map[string]any{"return_token_ids": true}),
		{name: "logprobs with top_logprobs", chat: map[string]any{"logprobs": true, "top_logprobs": 2},
			compl: map[string]any{"logprobs": 2}},
		{name: "top_logprobs without logprobs", chat: map[string]any{"top_logprobs": 2}},
		{name: "echo", compl: map[string]any{"echo": true}},
		{name: "echo with logprobs", compl: map[string]any{"echo": true, "logprobs": 0}},
		{name: "prompt_logprobs", chat: map[string]any{"prompt_logprobs": 1}, compl: map[string]any{"prompt_logprobs": 1}, jsonOnly: true},
	}
	for _, r := range []fidelityRow{
		row("include_usage", so(map[string]any{"include_usage": true})),
		row("include_usage false", so(map[string]any{"include_usage": false})),
		row("continuous_usage_stats without include_usage", so(map[string]any{"continuous_usage_stats": true})),
		row("continuous_usage_stats with include_usage", so(map[string]any{"include_usage": true, "continuous_usage_stats": true})),
		row("continuous_usage_stats with include_usage false", so(map[string]any{"include_usage": false, "continuous_usage_stats": true})),
		row("continuous_usage_stats and n=2", map[string]any{"n": 2, "stream_options": map[string]any{"continuous_usage_stats": true}}),
	} {
		r.streamOnly = true
		rows = append(rows, r)
	}
	return rows
}

// fidelityScript answers every request of a fidelity test: reasoning (chat
// only) and content, so that deltas of both kinds carry injected fields.
func fidelityScript(profile string) map[string]*llmtest.Script {
	return map[string]*llmtest.Script{"m": {Profile: profile, Turns: []llmtest.Turn{{Choice: llmtest.Choice{
		Reasoning: llmtest.Pieces{"Let", " me", " see"}, Content: llmtest.Pieces{"Hi", "!", " How", " are", " you?"}}}}}}
}

// fidelityDialect is an engine dialect with the kind the proxy is given.
type fidelityDialect struct {
	name    string
	profile string
	kind    proxy.UpstreamKind
	want    string // the record's upstream_kind
	ids     bool   // the proxy asks for token ids
}

// TestFidelity: for every client option, against each engine's dialect
// with the kind detected (and against OpenAI's, and vLLM configured as
// openai, where the proxy asks only for stream usage), the client gets byte for byte what the
// engine sends for its own request, streaming or not, while the record
// still holds the token ids the engine can give.
func TestFidelity(t *testing.T) {
	for _, d := range []fidelityDialect{
		{"vllm", llmtest.ProfileVLLM, proxy.KindAuto, "vllm", true},
		{"sglang", llmtest.ProfileSGLang, proxy.KindAuto, "sglang", true},
		{"openai", llmtest.ProfileOpenAI, proxy.KindAuto, "openai", false},
		{"vllm-as-openai", llmtest.ProfileVLLM, proxy.KindOpenAI, "openai", false},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			e := proxytest.NewWith(t, llmtest.Options{Scripts: fidelityScript(d.profile), Server: d.profile},
				func(o *proxy.Options) { o.Upstream.Kind = d.kind })
			for _, r := range fidelityRows() {
				for _, api := range []recorder.API{recorder.APIChatCompletions, recorder.APICompletions} {
					for _, stream := range []bool{false, true} {
						fidelityCase(t, e, d, r, api, stream)
					}
				}
			}
		})
	}
}

func fidelityCase(t *testing.T, e *proxytest.Env, d fidelityDialect, r fidelityRow, api recorder.API, stream bool) {
	fields, path := r.chat, "/chat/completions"
	if api == recorder.APICompletions {
		fields, path = r.compl, "/completions"
	}
	if fields == nil || (r.streamOnly && !stream) || (r.jsonOnly && stream) {
		return
	}
	name := fmt.Sprintf("%s/%s/stream=%v", r.name, api, stream)
	t.Run(name, func(t *testing.T) {
		req := map[string]any{"model": "m", "stream": stream}
		if api == recorder.APICompletions {
			req["prompt"] = "Say hi."
		} else {
			req["messages"] = []any{map[string]any{"role": "user", "content": "Say hi."}}
		}
		for k, v := range fields {
			req[k] = v
		}
		body := mustJSON(t, req)
		direct := do(t, "POST", e.Up.URL()+"/v1"+path, nil, body)
		ua := d.name + "/" + name
		via := do(t, "POST", e.Proxy.URL+"/e/ep-fidelity/v1"+path, map[string]string{"User-Agent": ua}, body)
		if via.Err != nil || direct.Err != nil {
			t.Fatalf("via: %v, direct: %v", via.Err, direct.Err)
		}
		if via.Status != direct.Status || !bytes.Equal(via.Body, direct.Body) {
			t.Fatalf("client got %d (%d B), the engine sends %d (%d B) without the proxy:\nvia:    %q\ndirect: %q",
				via.Status, len(via.Body), direct.Status, len(direct.Body), via.Body, direct.Body)
		}
		if got, want := via.Header.Get("Content-Length"), direct.Header.Get("Content-Length"); got != want {
			t.Errorf("Content-Length %q, want %q", got, want)
		}
		rec := e.Sink.ForHarness(t, ua)
		if rec.UpstreamKind != d.want {
			t.Errorf("record upstream_kind %q, want %q", rec.UpstreamKind, d.want)
		}
		// SGLang refuses token ids on streaming chat completions.
		idsGiven := direct.Status == 200 && d.ids &&
			!(d.profile == llmtest.ProfileSGLang && api == recorder.APIChatCompletions && stream)
		if idsGiven && (rec.Tokens == nil || len(rec.Tokens.CompletionIDs) == 0 || len(rec.Tokens.PromptIDs) == 0) {
			t.Fatalf("no token ids recorded (injected %v): %+v", rec.Injected, rec.Tokens)
		}
		// The record's response is the answer to the client's own request,
		// in the non-streaming shape: nothing the client did not see.
		if direct.Status == 200 {
			want := direct.Body
			if stream {
				want = do(t, "POST", e.Up.URL()+"/v1"+path, nil, nonStreaming(t, body)).Body
			}
			if !jsonEqual(t, rec.Response, want) {
				t.Errorf("recorded response (injected %v):\n%s\nthe engine's non-streaming answer to the client's request:\n%s",
					rec.Injected, rec.Response, want)
			}
		}
	})
}
