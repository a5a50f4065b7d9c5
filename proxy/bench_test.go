package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/internal/loadgen"
	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/proxy/proxytest"
	"github.com/orchard-rl/orchard/recorder"
)

// BenchmarkStream measures one streamed chat call of n chunks over
// loopback: straight to the scripted upstream, through the bare
// ReverseProxy that orchard-bench compares against, and through the proxy
// (recording and assembling; the sink discards). proxy minus bare is the
// proxy's own cost per request, its request path and the assembler; its
// growth with n is the cost per chunk.
func BenchmarkStream(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		pieces := make(llmtest.Pieces, n)
		for i := range pieces {
			pieces[i] = fmt.Sprintf(" tok%d", i)
		}
		script := &llmtest.Script{Turns: []llmtest.Turn{{Choice: llmtest.Choice{Content: pieces}}}}
		e := proxytest.NewWith(b, llmtest.Options{Scripts: map[string]*llmtest.Script{"bench": script}},
			func(o *proxy.Options) { o.Sink = proxy.SinkFunc(func(*recorder.Call) {}) })
		bare := httptest.NewServer(loadgen.NewBareProxy(proxytest.MustURL(b, e.Up.URL())))
		b.Cleanup(bare.Close)
		body := `{"model":"bench","stream":true,"messages":[{"role":"user","content":"go"}]}`
		for _, target := range []struct{ name, url string }{
			{"direct", e.Up.URL() + "/v1/chat/completions"},
			{"bare", bare.URL + "/v1/chat/completions"},
			{"proxy", e.Proxy.URL + "/e/bench/v1/chat/completions"},
		} {
			b.Run(fmt.Sprintf("chunks=%d/%s", n, target.name), func(b *testing.B) {
				benchPost(b, target.url, body)
			})
		}
	}
}

// BenchmarkRequestBody measures a call whose request is an agent's size
// (12 KB of messages, a 10-chunk answer) through the bare ReverseProxy and
// the proxy: what the proxy allocates beyond the bare proxy for a large
// request body shows in B/op.
func BenchmarkRequestBody(b *testing.B) {
	script := &llmtest.Script{Turns: []llmtest.Turn{{Choice: llmtest.Choice{Content: llmtest.Pieces{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}}}}}
	e := proxytest.NewWith(b, llmtest.Options{Scripts: map[string]*llmtest.Script{"bench": script}},
		func(o *proxy.Options) { o.Sink = proxy.SinkFunc(func(*recorder.Call) {}) })
	bare := httptest.NewServer(loadgen.NewBareProxy(proxytest.MustURL(b, e.Up.URL())))
	b.Cleanup(bare.Close)
	var msgs []string
	for i := 0; len(strings.Join(msgs, ",")) < 12<<10; i++ {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"message %d %s"}`, i, strings.Repeat("x", 200)))
	}
	body := `{"model":"bench","stream":true,"messages":[` + strings.Join(msgs, ",") + `]}`
	for _, target := range []struct{ name, url string }{
		{"bare", bare.URL + "/v1/chat/completions"},
		{"proxy", e.Proxy.URL + "/e/bench/v1/chat/completions"},
	} {
		b.Run(target.name, func(b *testing.B) {
			benchPost(b, target.url, body)
		})
	}
}

// benchPost posts body to url b.N times, reading each answer to its end.
func benchPost(b *testing.B, url, body string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	b.ReportAllocs()
	for b.Loop() {
		res, err := client.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
}
