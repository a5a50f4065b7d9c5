package llmtest

import (
	"context"
	"testing"
)

// BenchmarkChatStream measures one streamed vLLM chat call end to end over a
// loopback socket (16 token chunks with ids and logprobs), the fixed cost the
// fake upstream adds to proxy benchmarks.
func BenchmarkChatStream(b *testing.B) {
	srv := NewServer(Options{})
	defer srv.Close()
	body := `{"model":"tools","messages":[{"role":"user","content":"w"}],"stream":true,"stream_options":{"include_usage":true},"return_token_ids":true,"logprobs":true}`
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := do(b, srv, context.Background(), "/v1/chat/completions", body, nil); err != nil {
			b.Fatal(err)
		}
	}
}
