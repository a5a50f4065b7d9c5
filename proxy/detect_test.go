package proxy_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/proxy/proxytest"
)

// logBuffer collects a logger's text output for assertions.
type logBuffer struct {
	mu sync.Mutex // guards following
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// detectEnv is a proxy with an auto upstream: the scripted server, with
// GET /v1/models answered by models when it is set.
type detectEnv struct {
	up    *llmtest.Handler
	srv   *httptest.Server
	proxy *httptest.Server
	sink  *proxytest.Sink
	logs  *logBuffer
}

func newDetectEnv(t *testing.T, server string, models http.HandlerFunc, probeTimeout time.Duration) *detectEnv {
	t.Helper()
	up, err := llmtest.NewHandler(llmtest.Options{Server: server})
	if err != nil {
		t.Fatal(err)
	}
	e := &detectEnv{up: up, sink: proxytest.NewSink(), logs: &logBuffer{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if models != nil && r.URL.Path == "/v1/models" {
			models(w, r)
			return
		}
		up.ServeHTTP(w, r)
	}))
	h := proxy.New(proxy.Options{
		Upstream:     &proxy.Upstream{BaseURL: mustURL(t, e.srv.URL+"/v1"), Kind: proxy.KindAuto},
		Sink:         e.sink,
		Registry:     prometheus.NewRegistry(),
		Logger:       slog.New(slog.NewTextHandler(e.logs, nil)),
		ProbeTimeout: probeTimeout,
	})
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.proxy = httptest.NewServer(h)
	t.Cleanup(func() {
		e.proxy.Close()
		h.Close()
		up.Close()
		e.srv.Close()
	})
	return e
}

// call makes one chat call through the proxy and returns the kind its
// record holds and the body the upstream received.
func (e *detectEnv) call(t *testing.T, ua string) (string, []byte) {
	t.Helper()
	body := []byte(`{"model":"text","messages":[{"role":"user","content":"hi"}]}`)
	r := do(t, "POST", e.proxy.URL+"/v1/chat/completions", map[string]string{"User-Agent": ua}, body)
	if r.Err != nil || r.Status != 200 {
		t.Fatalf("call: %d %v %s", r.Status, r.Err, r.Body)
	}
	rec := e.sink.ForHarness(t, ua)
	for _, q := range e.up.Requests() {
		if q.Header.Get("User-Agent") == ua {
			return rec.UpstreamKind, q.Body
		}
	}
	t.Fatalf("upstream saw no call from %q", ua)
	return "", nil
}

// metric returns the proxy's orchard_upstream_kind lines.
func (e *detectEnv) metric(t *testing.T) string {
	t.Helper()
	r := do(t, "GET", e.proxy.URL+"/metrics", nil, nil)
	var lines []string
	for _, l := range strings.Split(string(r.Body), "\n") {
		if strings.HasPrefix(l, "orchard_upstream_kind{") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// TestDetectKind: with kind auto the proxy learns each server's kind from
// GET /models, records it, exports it and logs it; a server that does not
// say what it is gets no token injection, as openai-compatible, with a
// warning.
func TestDetectKind(t *testing.T) {
	const unknownMsg = `level=WARN msg="upstream kind unknown; treating it as openai-compatible, no token ids are asked for (set --upstream-kind to override)"`
	status404 := func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "404 page not found", http.StatusNotFound) }
	garbage := func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html>hello</html>")) }
	tests := []struct {
		name   string
		server string
		models http.HandlerFunc
		want   string
		ids    bool   // return_token_ids injected
		log    string // a line of the log starts with this
	}{
		{"vllm", llmtest.ProfileVLLM, nil, "vllm", true, `level=INFO msg="upstream kind detected"`},
		{"sglang", llmtest.ProfileSGLang, nil, "sglang", true, `level=INFO msg="upstream kind detected"`},
		{"openai", llmtest.ProfileOpenAI, nil, "openai", false, `level=INFO msg="upstream kind detected"`},
		{"anthropic", llmtest.ServerAnthropic, nil, "anthropic", false, `level=INFO msg="upstream kind detected"`},
		{"unknown owner", "", nil, "unknown", false, unknownMsg},
		{"models 404", "", status404, "unknown", false, unknownMsg},
		{"models garbage", "", garbage, "unknown", false, unknownMsg},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newDetectEnv(t, tt.server, tt.models, 0)
			kind, sent := e.call(t, tt.name)
			if kind != tt.want {
				t.Errorf("record upstream_kind = %q, want %q", kind, tt.want)
			}
			if got := gjson.GetBytes(sent, "return_token_ids").Bool(); got != tt.ids {
				t.Errorf("return_token_ids injected = %v, want %v: %s", got, tt.ids, sent)
			}
			wantMetric := `orchard_upstream_kind{kind="` + tt.want + `",upstream="` + e.srv.URL + `/v1"} 1`
			if got := e.metric(t); got != wantMetric {
				t.Errorf("metrics:\n%s\nwant\n%s", got, wantMetric)
			}
			if logs := e.logs.String(); !hasLine(logs, tt.log, "upstream="+e.srv.URL+"/v1") {
				t.Errorf("log has no line starting %s:\n%s", tt.log, logs)
			}
		})
	}
}

// hasLine reports whether a line of logs (after its time attribute)
// starts with prefix and contains attr.
func hasLine(logs, prefix, attr string) bool {
	for _, l := range strings.Split(logs, "\n") {
		_, rest, _ := strings.Cut(l, " ")
		if strings.HasPrefix(rest, prefix) && strings.Contains(rest, attr) {
			return true
		}
	}
	return false
}

// TestDetectKindRetries: a server that gives no answer at first (a 503
// while it loads its model) is probed again by the next call, and its kind
// is learnt once it answers; the failure is logged.
func TestDetectKindRetries(t *testing.T) {
	var probes atomic.Int32
	var e *detectEnv
	models := func(w http.ResponseWriter, r *http.Request) {
		if probes.Add(1) == 1 {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		e.up.ServeHTTP(w, r)
	}
	e = newDetectEnv(t, llmtest.ProfileVLLM, models, 0)
	e.call(t, "first") // waits for the failed probe, or starts the next one
	kind, sent := e.call(t, "second")
	if kind != "vllm" || !gjson.GetBytes(sent, "return_token_ids").Bool() {
		t.Fatalf("second call: kind %q, sent %s; want vllm with token ids", kind, sent)
	}
	if n := probes.Load(); n != 2 {
		t.Errorf("%d probes, want 2", n)
	}
	if logs := e.logs.String(); !hasLine(logs, `level=WARN msg="upstream kind probe got no answer; calls go as openai-compatible until one comes"`, "status 503") {
		t.Errorf("no warning for the failed probe:\n%s", logs)
	}
	want := `orchard_upstream_kind{kind="vllm",upstream="` + e.srv.URL + `/v1"} 1`
	if got := e.metric(t); got != want {
		t.Errorf("metrics:\n%s\nwant\n%s", got, want)
	}
}

// TestDetectKindHangingProbe: a server that never answers GET /models
// holds a call up at most ProbeTimeout; the call goes on as unknown.
func TestDetectKindHangingProbe(t *testing.T) {
	hang := func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	e := newDetectEnv(t, llmtest.ProfileVLLM, hang, 50*time.Millisecond)
	kind, sent := e.call(t, "hung")
	if kind != "unknown" || gjson.GetBytes(sent, "return_token_ids").Exists() {
		t.Fatalf("kind %q, sent %s; want unknown without token ids", kind, sent)
	}
}

// TestParseUpstreamKind: settings parse; anything else is refused with an
// error naming every valid value.
func TestParseUpstreamKind(t *testing.T) {
	for _, s := range []string{"auto", "vllm", "sglang", "openai", "anthropic"} {
		if k, err := proxy.ParseUpstreamKind(s); err != nil || string(k) != s {
			t.Errorf("ParseUpstreamKind(%q) = %q, %v", s, k, err)
		}
	}
	for _, s := range []string{"", "unknown", "VLLM", "tgi"} {
		_, err := proxy.ParseUpstreamKind(s)
		want := `upstream kind "` + s + `": want one of auto, vllm, sglang, openai, anthropic`
		if err == nil || err.Error() != want {
			t.Errorf("ParseUpstreamKind(%q) error = %v, want %s", s, err, want)
		}
	}
}
