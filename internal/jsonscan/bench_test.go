package jsonscan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// BenchmarkValid compares Valid with encoding/json's and gjson's on an
// agent-shaped request (an 8 KB chat history).
func BenchmarkValid(b *testing.B) {
	var msgs []string
	for i := range 24 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":%q}`, strings.Repeat("some words of a prompt \n", 12)+fmt.Sprint(i)))
	}
	doc := []byte(`{"model":"m","stream":true,"messages":[` + strings.Join(msgs, ",") + `],"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}]}`)
	for _, tc := range []struct {
		name string
		fn   func([]byte) bool
	}{{"jsonscan", Valid}, {"encoding-json", json.Valid}, {"gjson", gjson.ValidBytes}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if !tc.fn(doc) {
					b.Fatal("invalid")
				}
			}
		})
	}
}

// BenchmarkValidChunk is Valid on one vLLM chat chunk with token ids and
// logprobs, which the proxy validates (in part) for every chunk it strips.
func BenchmarkValidChunk(b *testing.B) {
	doc := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"qwen","choices":[{"index":0,"delta":{"content":" tok"},"logprobs":{"content":[{"token":" tok","logprob":-0.125,"bytes":[32,116,111,107],"top_logprobs":[]}]},"finish_reason":null,"token_ids":[1234]}]}`)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if !Valid(doc) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkSkipValue skips an assembled vLLM chat response's choices (500
// tokens with logprobs), as the store does to reach its prompt_token_ids
// and lineage does past a choice's logprobs.
func BenchmarkSkipValue(b *testing.B) {
	var entries []string
	for i := range 500 {
		entries = append(entries, fmt.Sprintf(`{"token":" t%d","logprob":-0.%d,"bytes":[32,116,%d],"top_logprobs":[]}`, i, i+1, 48+i%10))
	}
	doc := []byte(`[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("word ", 500) +
		`"},"logprobs":{"content":[` + strings.Join(entries, ",") + `]},"finish_reason":"stop","token_ids":[` +
		strings.Repeat("1234,", 499) + `1234]}]`)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if SkipValue(doc, 0) != len(doc) {
			b.Fatal("wrong end")
		}
	}
}
