package proxy_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/proxy"
)

// TestBaseURLWarning: a base URL without a version path, or with the API
// path on it, is logged as a warning when the proxy starts.
func TestBaseURLWarning(t *testing.T) {
	for _, tc := range []struct {
		base string
		warn string // "" for none
	}{
		{"http://127.0.0.1:8000/v1", ""},
		{"http://127.0.0.1:8000/v1/", ""},
		{"https://example.com/api/v2", ""},
		{"https://example.com/v1beta", ""},
		{"http://127.0.0.1:8000", "no version path"},
		{"http://127.0.0.1:8000/openai", "no version path"},
		{"http://127.0.0.1:8000/v1/chat/completions", "ends with the API path /chat/completions"},
		{"https://api.anthropic.com/v1/messages", "ends with the API path /messages"},
	} {
		t.Run(tc.base, func(t *testing.T) {
			var logs bytes.Buffer
			h := proxy.New(proxy.Options{
				Upstream: &proxy.Upstream{BaseURL: mustURL(t, tc.base)},
				Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
			})
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			got := logs.String()
			if tc.warn == "" && got != "" {
				t.Errorf("logged %q, want nothing", got)
			}
			if tc.warn != "" && (!strings.Contains(got, "upstream base URL looks wrong") || !strings.Contains(got, tc.warn)) {
				t.Errorf("logged %q, want a warning with %q", got, tc.warn)
			}
		})
	}
}

// TestUpstream404Explained: with the base URL missing /v1 the upstream
// answers 404, which the client gets as is and the record explains.
func TestUpstream404Explained(t *testing.T) {
	var logs bytes.Buffer
	e := newEnv(t, func(o *proxy.Options) {
		o.Upstream.BaseURL.Path = ""
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	body := []byte(`{"model":"text","messages":[{"role":"user","content":"hi"}]}`)
	r := do(t, "POST", e.Proxy.URL+"/e/ep-404/v1/chat/completions", nil, body)
	if r.Status != http.StatusNotFound || r.Header.Get("X-Orchard-Error") != "" {
		t.Fatalf("status %d (X-Orchard-Error %q), want the upstream's 404", r.Status, r.Header.Get("X-Orchard-Error"))
	}
	c := e.Sink.Next(t)
	if c.Status != http.StatusNotFound || !strings.Contains(c.Error, "version path") {
		t.Errorf("record status %d error %q, want 404 with a hint about the version path", c.Status, c.Error)
	}
	if !strings.Contains(logs.String(), "upstream answered 404 for a model call") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
}
