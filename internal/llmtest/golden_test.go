package llmtest

import (
	"bytes"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/llm/golden files")

// goldens are the exact bytes the server emits for fixed requests; any change
// to a wire format shows up as a diff here.
var goldens = []struct{ name, path, body, fault string }{
	{"chat-vllm-tools-stream", "/v1/chat/completions", `{"model":"tools","messages":[{"role":"user","content":"w"}],"stream":true,"stream_options":{"include_usage":true},"return_token_ids":true,"logprobs":true,"top_logprobs":1}`, ""},
	{"chat-vllm-tools", "/v1/chat/completions", `{"model":"tools","messages":[{"role":"user","content":"w"}],"return_token_ids":true,"logprobs":true,"top_logprobs":1}`, ""},
	{"chat-vllm-plain-stream", "/v1/chat/completions", `{"model":"reasoning","messages":[{"role":"user","content":"w"}],"stream":true}`, ""},
	{"chat-openai-tools-stream", "/v1/chat/completions", `{"model":"openai-tools","messages":[{"role":"user","content":"w"}],"stream":true,"stream_options":{"include_usage":true}}`, ""},
	{"chat-openai-tools", "/v1/chat/completions", `{"model":"openai-tools","messages":[{"role":"user","content":"w"}]}`, ""},
	{"chat-sglang-tools", "/v1/chat/completions", `{"model":"sglang-tools","messages":[{"role":"user","content":"w"}],"return_token_ids":true}`, ""},
	{"chat-vllm-n3-stream", "/v1/chat/completions", `{"model":"multi","n":3,"messages":[{"role":"user","content":"w"}],"stream":true,"return_token_ids":true}`, ""},
	{"completions-vllm-stream", "/v1/completions", `{"model":"text","prompt":"p","stream":true,"stream_options":{"include_usage":true},"return_token_ids":true,"logprobs":1}`, ""},
	{"completions-vllm", "/v1/completions", `{"model":"text","prompt":"p","return_token_ids":true,"logprobs":1}`, ""},
	{"responses-tools-stream", "/v1/responses", `{"model":"tools","input":"w","stream":true,"include":["reasoning.encrypted_content"]}`, ""},
	{"responses-tools", "/v1/responses", `{"model":"tools","input":"w","include":["reasoning.encrypted_content"]}`, ""},
	{"messages-redacted-stream", "/v1/messages", `{"model":"redacted","max_tokens":9,"messages":[{"role":"user","content":"w"}],"stream":true}`, ""},
	{"messages-redacted", "/v1/messages", `{"model":"redacted","max_tokens":9,"messages":[{"role":"user","content":"w"}]}`, ""},
	{"count-tokens", "/v1/messages/count_tokens", `{"model":"tools","messages":[{"role":"user","content":"w"}]}`, ""},
	{"embeddings", "/v1/embeddings", `{"model":"e","input":["a","b"]}`, ""},
	{"fallback-default", "/v1/chat/completions", `{"model":"nope","messages":[]}`, ""},
	{"fault-503-chat", "/v1/chat/completions", `{"model":"text","messages":[]}`, "status=503"},
	{"fault-529-messages", "/v1/messages", `{"model":"text","messages":[]}`, "status=529"},
	{"fault-eof-after-2", "/v1/chat/completions", `{"model":"text","messages":[],"stream":true}`, "eof_after=2"},
}

func TestGolden(t *testing.T) {
	t.Parallel()
	srv := NewServer(Options{})
	defer srv.Close()
	dir, err := DefaultScriptsDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL()+g.path, strings.NewReader(g.body))
			if g.fault != "" {
				req.Header.Set(HeaderFault, g.fault)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got = append([]byte(resp.Status+" "+resp.Header.Get("Content-Type")+"\n"), got...)
			path := filepath.Join(dir, "golden", g.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: body differs from %s:\n%s", g.name, path, got)
			}
		})
	}
}
