package sse

import (
	"fmt"
	"strings"
	"testing"
)

// chunk is a typical vLLM chat.completion.chunk event (~300 bytes).
const chunk = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"qwen","choices":[{"index":0,"delta":{"content":" hello"},"logprobs":null,"finish_reason":null,"token_ids":[1234]}]}` + "\n\n"

// BenchmarkFramer measures the proxy's per-event framing cost when upstream
// reads carry n events each; it must not allocate per event.
func BenchmarkFramer(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			in := []byte(strings.Repeat(chunk, n))
			f := NewFramer(0)
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				f.Write(in)
				for ev := f.Next(); ev != nil; ev = f.Next() {
				}
			}
		})
	}
}

// BenchmarkEvents measures parsing a whole recorded body off the hot path.
func BenchmarkEvents(b *testing.B) {
	in := []byte(strings.Repeat(chunk, 100))
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		for ev := range Events(in) {
			_ = ev
		}
	}
}
