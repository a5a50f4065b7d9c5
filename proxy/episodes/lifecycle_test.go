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
	"github.com/orchard-rl/orchard/recorder/embedded"
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

// TestOnFinish: the handler reports every finish it learns of, through its
// finish endpoint and from the finish feed, to the function OnFinish set.
func TestOnFinish(t *testing.T) {
	st, err := embedded.Open(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := &finishFeed{subscribed: make(chan func(string), 1)}
	h := episodes.New(episodes.Options{Store: st, Signer: newSigner(t), Finishes: f})
	got := make(chan string, 4)
	h.OnFinish(func(ep string) { got <- ep })
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	post := func(path, body string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", episodes.Prefix+path, strings.NewReader(body)))
		return rec.Code
	}
	if code := post("/episodes", `{"id":"ep-1"}`); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if code := post("/episodes/ep-1/finish", `{"status":"success","reward":1}`); code != http.StatusOK {
		t.Fatalf("finish: %d", code)
	}
	// Both report before they return.
	reported := func(want string) {
		t.Helper()
		select {
		case ep := <-got:
			if ep != want {
				t.Fatalf("reported %q, want %q", ep, want)
			}
		default:
			t.Fatalf("%s not reported", want)
		}
	}
	reported("ep-1")
	(<-f.subscribed)("ep-2") // another replica's finish
	reported("ep-2")
}

// finishFeed is a FinishFeed that hands its subscriber's callback to the
// test.
type finishFeed struct{ subscribed chan func(string) }

func (f *finishFeed) PublishFinished(context.Context, string) error { return nil }

func (f *finishFeed) SubscribeFinished(ctx context.Context, finished func(string), resync func()) error {
	resync()
	f.subscribed <- finished
	<-ctx.Done()
	return ctx.Err()
}
