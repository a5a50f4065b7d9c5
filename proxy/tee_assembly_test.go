package proxy_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
)

// TestTeeAssembly: streams of 0 to 6,000 events (up to 720 KB), which the
// tee assembles as they flow, are recorded as the assembler makes them
// from the whole body at once; the client gets the upstream's bytes. The
// upstream flushes every event, so the proxy reads the body in many pieces.
func TestTeeAssembly(t *testing.T) {
	for _, n := range []int{0, 3, 300, 600, 6000} {
		t.Run(fmt.Sprintf("events=%d", n), func(t *testing.T) {
			body := chatStream(n)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				for ev := range strings.SplitAfterSeq(string(body), "\n\n") {
					w.Write([]byte(ev))
					w.(http.Flusher).Flush()
				}
			}))
			defer up.Close()
			s := newSink()
			h := proxy.New(proxy.Options{Upstream: &proxy.Upstream{BaseURL: mustURL(t, up.URL+"/v1")}, Sink: s})
			if err := h.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			px := httptest.NewServer(h)
			defer func() { px.Close(); h.Close() }()

			req := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"go"}]}`
			via := do(t, "POST", px.URL+"/e/ep-defer/v1/chat/completions", map[string]string{"User-Agent": "defer"}, []byte(req))
			if via.Err != nil || via.Status != 200 {
				t.Fatalf("status %d err %v", via.Status, via.Err)
			}
			if !bytes.Equal(via.Body, body) {
				t.Fatalf("client got %d bytes, upstream sent %d", len(via.Body), len(body))
			}
			want := assemble.Stream(recorder.APIChatCompletions, body)
			c := s.ForHarness(t, "defer")
			if !bytes.Equal(c.Response, want.Response) {
				t.Fatalf("recorded response (%d B) differs from the whole body's assembly (%d B):\n%.300s\n%.300s", len(c.Response), len(want.Response), c.Response, want.Response)
			}
			if !bytes.Equal(c.Usage, want.Usage) || c.EndReason != recorder.EndDone {
				t.Fatalf("usage %s end %q, want %s done", c.Usage, c.EndReason, want.Usage)
			}
		})
	}
}

// chatStream is a chat completions stream of n content events of about
// 100 bytes each, then a usage chunk and [DONE].
func chatStream(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for i := range n {
		fmt.Fprintf(&b, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"w%d \"q\" é "},"finish_reason":null}]}`+"\n\n", i)
	}
	b.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	fmt.Fprintf(&b, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n", n, n+3)
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}
