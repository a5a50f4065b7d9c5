package assemble_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/internal/loadgen"
	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
)

// BenchmarkStreamChat measures reassembling a recorded vLLM chat stream of n
// token chunks (ids and logprobs on), the recorder's per-call cost off the
// request path.
func BenchmarkStreamChat(b *testing.B) {
	const chunk = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"qwen","choices":[{"index":0,"delta":{"content":" tok"},"logprobs":{"content":[{"token":" tok","logprob":-0.125,"bytes":[32,116,111,107],"top_logprobs":[]}]},"finish_reason":null,"token_ids":[1234]}]}` + "\n\n"
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			body := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"qwen","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":[1,2,3]}` + "\n\n" +
				strings.Repeat(chunk, n) + "data: [DONE]\n\n")
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if r := assemble.Stream(recorder.APIChatCompletions, body); !r.Done {
					b.Fatal("not done")
				}
			}
		})
	}
}

// BenchmarkStreamPlain measures reassembling an OpenAI-style chat stream of
// n content chunks (no ids or logprobs): the plain path's per-call cost,
// which the record worker pays for streams the proxy kept raw.
func BenchmarkStreamPlain(b *testing.B) {
	var sb strings.Builder
	for _, n := range []int{100, 1000} {
		sb.Reset()
		sb.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}` + "\n\n")
		for i := range n {
			fmt.Fprintf(&sb, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" word%d"},"logprobs":null,"finish_reason":null}]}`+"\n\n", i)
		}
		sb.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":9,"total_tokens":18}}` + "\n\ndata: [DONE]\n\n")
		body := []byte(sb.String())
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if r := assemble.Stream(recorder.APIChatCompletions, body); !r.Done {
					b.Fatal("not done")
				}
			}
		})
	}
}

// BenchmarkStreamAgent measures reassembling a plain-path agent turn shaped
// like the load benchmark's (orchard-bench) upstream: a role chunk, then
// reasoning, content and a tool call's arguments, a third of n chunks each,
// then the finish and usage chunks. Its chunks change shape six times,
// each a chunk parsed in full instead of replayed through the template.
func BenchmarkStreamAgent(b *testing.B) {
	const head = `data: {"id":"chatcmpl-llmtest-bench-0","object":"chat.completion.chunk","created":1767225600,"model":"bench","choices":[{"index":0,`
	var sb strings.Builder
	sb.WriteString(head + `"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null}` + "\n\n")
	const n = 275
	for i := range n / 3 {
		fmt.Fprintf(&sb, head+`"delta":{"reasoning":"w%03d"},"logprobs":null,"finish_reason":null,"token_ids":null}]}`+"\n\n", i)
	}
	for i := range n / 3 {
		fmt.Fprintf(&sb, head+`"delta":{"content":"w%03d"},"logprobs":null,"finish_reason":null,"token_ids":null}]}`+"\n\n", i)
	}
	sb.WriteString(head + `"delta":{"tool_calls":[{"id":"call_bench_0","type":"function","index":0,"function":{"name":"bash","arguments":"{\"command\":\""}}]},"logprobs":null,"finish_reason":null,"token_ids":null}]}` + "\n\n")
	for i := range n / 3 {
		fmt.Fprintf(&sb, head+`"delta":{"tool_calls":[{"index":0,"function":{"arguments":"w%03d"}}]},"logprobs":null,"finish_reason":null,"token_ids":null}]}`+"\n\n", i)
	}
	sb.WriteString(head + `"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null,"token_ids":null}]}` + "\n\n")
	sb.WriteString(`data: {"id":"chatcmpl-llmtest-bench-0","object":"chat.completion.chunk","created":1767225600,"model":"bench","choices":[],"usage":{"prompt_tokens":512,"total_tokens":787,"completion_tokens":275}}` + "\n\ndata: [DONE]\n\n")
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		streamIn4K(b, body)
	}
}

// BenchmarkStreamEpisode assembles the load benchmark's own streams on the
// plain path: the eight turns of an episode as its upstream sends them to a
// client that asks for usage only, one after the other.
func BenchmarkStreamEpisode(b *testing.B) {
	var sc loadgen.Scenario
	sc.Defaults()
	bodies, err := sc.Bodies(true, false, false)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(bytes.Join(bodies, nil))))
	b.ReportAllocs()
	for b.Loop() {
		for _, body := range bodies {
			streamIn4K(b, body)
		}
	}
}

// streamIn4K assembles a chat stream fed to a Streamer 4 KiB at a time, as
// the proxy's reads hand it over, and fails on a stream left unfinished.
func streamIn4K(b *testing.B, body []byte) {
	s, _ := assemble.NewStreamer(recorder.APIChatCompletions)
	for p := body; len(p) > 0; p = p[min(len(p), 4096):] {
		s.Write(p[:min(len(p), 4096)])
	}
	if r := s.Result(); !r.Done || r.Err != "" {
		b.Fatal("not done", r.Err)
	}
}
