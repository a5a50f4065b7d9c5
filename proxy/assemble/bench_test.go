package assemble_test

import (
	"fmt"
	"strings"
	"testing"

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
