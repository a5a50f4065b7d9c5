package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/orchard-rl/orchard/proxy"
)

// TestHandlerLifecycle: New starts nothing, so a Handler serves only
// between Start and Close; outside that window it answers a JSON 503 and
// never reaches the upstream. Start and Close each work once.
func TestHandlerLifecycle(t *testing.T) {
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"x","object":"chat.completion","choices":[]}`))
	}))
	defer up.Close()
	h := proxy.New(proxy.Options{Upstream: &proxy.Upstream{BaseURL: mustURL(t, up.URL+"/v1"), Kind: proxy.KindAuto}})
	call := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/e/ep/v1/chat/completions",
			strings.NewReader(`{"model":"text","messages":[{"role":"user","content":"hi"}]}`)))
		return rec
	}

	if rec := call(); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "not started") {
		t.Fatalf("before Start: %d %s, want 503 saying the handler was not started", rec.Code, rec.Body)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("before Start the upstream got %d requests (a probe or a call), want none", n)
	}
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(t.Context()); err == nil {
		t.Error("second Start: no error")
	}
	if rec := call(); rec.Code != http.StatusOK {
		t.Fatalf("after Start: %d %s, want 200", rec.Code, rec.Body)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if rec := call(); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("after Close: %d %s, want 503", rec.Code, rec.Body)
	}
	if err := h.Close(); err == nil {
		t.Error("second Close: no error")
	}
	if err := h.Start(t.Context()); err == nil {
		t.Error("Start after Close: no error")
	}
}
