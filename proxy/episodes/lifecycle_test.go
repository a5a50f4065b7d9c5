package episodes_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/proxy/episodes"
	"github.com/orchard-rl/orchard/recorder"
)

// feed is a FinishFeed whose subscription reports when it starts and ends.
type feed struct{ subscribed, ended chan struct{} }

func (f *feed) PublishFinished(context.Context, string) error { return nil }

func (f *feed) SubscribeFinished(ctx context.Context, _ func(string), resync func()) error {
	close(f.subscribed)
	resync()
	<-ctx.Done()
	close(f.ended)
	return ctx.Err()
}

// TestHandlerLifecycle: New starts nothing, so a Handler serves and
// verifies only between Start and Close, failing closed outside it; the
// finish feed runs from Start until Start's ctx is done. Start and Close
// each work once.
func TestHandlerLifecycle(t *testing.T) {
	signer := newSigner(t)
	f := &feed{subscribed: make(chan struct{}), ended: make(chan struct{})}
	st := &fakeStore{status: map[string]string{"run": recorder.StatusRunning}}
	h := episodes.New(episodes.Options{Store: st, Signer: signer, Finishes: f})
	tok := signer.Issue("run", time.Hour)
	get := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", episodes.Prefix+"/episodes/nope", nil))
		return rec
	}

	if rec := get(); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "not started") {
		t.Errorf("before Start: %d %s, want 503 saying the handler was not started", rec.Code, rec.Body)
	}
	if ep, err := h.Verify(t.Context(), tok); err == nil {
		t.Errorf("Verify before Start = %q, nil; want it refused", ep)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err == nil {
		t.Error("second Start: no error")
	}
	<-f.subscribed
	if ep, err := h.Verify(t.Context(), tok); ep != "run" || err != nil {
		t.Errorf("Verify after Start = %q, %v; want run, nil", ep, err)
	}
	cancel()
	select {
	case <-f.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the finish feed outlived Start's ctx")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if rec := get(); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("after Close: %d %s, want 503", rec.Code, rec.Body)
	}
	if _, err := h.Verify(t.Context(), tok); err == nil {
		t.Error("Verify after Close: no error")
	}
	if err := h.Close(); err == nil {
		t.Error("second Close: no error")
	}
}
