package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/recorder"
)

func chatBody(stream bool) []byte {
	s := `{"model":"tools","stream":false,"messages":[{"role":"user","content":"weather?"}]}`
	if stream {
		s = strings.Replace(s, `"stream":false`, `"stream":true`, 1)
	}
	return []byte(s)
}

// TestUpstreamErrorStatus: 4xx/5xx answers reach the client verbatim and
// are recorded with their body.
func TestUpstreamErrorStatus(t *testing.T) {
	e := newEnv(t, nil)
	for _, status := range []string{"400", "429", "503"} {
		t.Run(status, func(t *testing.T) {
			hdr := map[string]string{llmtest.HeaderFault: "status=" + status, "User-Agent": "status-" + status}
			direct := do(t, "POST", e.Up.URL()+"/v1/chat/completions", map[string]string{llmtest.HeaderFault: "status=" + status}, chatBody(true))
			via := do(t, "POST", e.Proxy.URL+"/e/ep-err/v1/chat/completions", hdr, chatBody(true))
			if via.Status != direct.Status || !bytes.Equal(via.Body, direct.Body) {
				t.Fatalf("via proxy %d %q, direct %d %q", via.Status, via.Body, direct.Status, direct.Body)
			}
			if via.Header.Get("Content-Type") != direct.Header.Get("Content-Type") {
				t.Errorf("content-type %q, want %q", via.Header.Get("Content-Type"), direct.Header.Get("Content-Type"))
			}
			c := e.Sink.ForHarness(t, "status-"+status)
			if c.Status != atoi(status) || c.EndReason != recorder.EndDone || !jsonEqual(t, c.Response, direct.Body) {
				t.Errorf("record status %d end %q response %s", c.Status, c.EndReason, c.Response)
			}
		})
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// TestUpstreamResetMidStream: the client sees the cut and the record keeps
// the partial response with end_reason upstream_error.
func TestUpstreamResetMidStream(t *testing.T) {
	e := newEnv(t, nil)
	hdr := map[string]string{llmtest.HeaderFault: "reset_after=4", "User-Agent": "reset"}
	direct := do(t, "POST", e.Up.URL()+"/v1/chat/completions", map[string]string{llmtest.HeaderFault: "reset_after=4"}, chatBody(true))
	via := do(t, "POST", e.Proxy.URL+"/e/ep-reset/v1/chat/completions", hdr, chatBody(true))
	if via.Err == nil {
		t.Fatalf("client read the cut stream without an error: %q", via.Body)
	}
	if !bytes.HasPrefix(direct.Body, via.Body) || bytes.Count(via.Body, []byte("\n\n")) != 4 {
		t.Fatalf("client got %q; want the first 4 events of %q", via.Body, direct.Body)
	}
	c := e.Sink.ForHarness(t, "reset")
	if c.EndReason != recorder.EndUpstreamError || c.Error == "" {
		t.Fatalf("end_reason %q error %q, want upstream_error with a message", c.EndReason, c.Error)
	}
	if got := gjson.GetBytes(c.Response, "choices.0.message.reasoning").String(); got == "" {
		t.Errorf("partial response lost: %s", c.Response)
	}
}

// TestClientDisconnectCancelsUpstream: when the client goes away the
// upstream sees its request cancelled, and the record says client_gone.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.Proxy.URL+"/e/ep-gone/v1/chat/completions", bytes.NewReader(chatBody(true)))
	req.Header.Set(llmtest.HeaderFault, "hang_after=2")
	req.Header.Set("User-Agent", "gone")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	// Read the two events the upstream sends before hanging, then leave.
	br := bufio.NewReader(res.Body)
	for events := 0; events < 2; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		if line == "\n" {
			events++
		}
	}
	cancel()
	select {
	case r := <-e.Up.Canceled():
		if r.Path != "/v1/chat/completions" {
			t.Errorf("cancelled request path %q", r.Path)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("upstream never saw its request cancelled")
	}
	c := e.Sink.ForHarness(t, "gone")
	if c.EndReason != recorder.EndClientGone {
		t.Fatalf("end_reason %q, want client_gone", c.EndReason)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestMalformedJSONForwardedRaw: a body that is not JSON goes upstream
// byte for byte and is recorded as a string.
func TestMalformedJSONForwardedRaw(t *testing.T) {
	e := newEnv(t, nil)
	body := []byte(`{"model":"text","messages":[{"role":"user"` + "\x00garbage")
	via := do(t, "POST", e.Proxy.URL+"/e/ep-raw/v1/chat/completions", map[string]string{"User-Agent": "raw"}, body)
	if via.Err != nil {
		t.Fatal(via.Err)
	}
	reqs := e.Up.Requests()
	if got := reqs[len(reqs)-1].Body; !bytes.Equal(got, body) {
		t.Fatalf("upstream got %q, want %q", got, body)
	}
	c := e.Sink.ForHarness(t, "raw")
	if !c.RequestRaw || gjson.ParseBytes(c.Request).String() != string(body) {
		t.Fatalf("request_raw %v request %s", c.RequestRaw, c.Request)
	}
	if c.Status != via.Status {
		t.Errorf("record status %d, client got %d", c.Status, via.Status)
	}
}

// TestLargeBody: a 50 MB body streams through; one over the limit is
// refused with 413 and a JSON error. The upstream here only counts bytes:
// the scripted one parses bodies, which is beside the point.
func TestLargeBody(t *testing.T) {
	var got atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got.Store(n)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[]}`)
	}))
	defer up.Close()
	s := newSink()
	h := proxy.New(proxy.Options{Upstream: &proxy.Upstream{BaseURL: mustURL(t, up.URL+"/v1")}, Sink: s, MaxBodyBytes: 64 << 20})
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	px := httptest.NewServer(h)
	defer func() { px.Close(); h.Close() }()

	big := make([]byte, 0, 50<<20+200)
	big = append(big, `{"model":"text","messages":[{"role":"user","content":"`...)
	big = append(big, bytes.Repeat([]byte("a"), 50<<20)...)
	big = append(big, `"}]}`...)
	via := do(t, "POST", px.URL+"/e/ep-big/v1/chat/completions", map[string]string{"User-Agent": "big"}, big)
	if via.Err != nil || via.Status != 200 {
		t.Fatalf("50 MB body: status %d err %v", via.Status, via.Err)
	}
	if got.Load() != int64(len(big)) {
		t.Fatalf("upstream got %d bytes, want %d", got.Load(), len(big))
	}
	if c := s.ForHarness(t, "big"); len(c.Request) != len(big) {
		t.Fatalf("recorded request is %d bytes, want %d", len(c.Request), len(big))
	}

	got.Store(-1)
	over := do(t, "POST", px.URL+"/v1/chat/completions", nil, bytes.Repeat([]byte("b"), 64<<20+1))
	if over.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", over.Status)
	}
	if msg := gjson.GetBytes(over.Body, "error.message").String(); !strings.Contains(msg, "limit") {
		t.Fatalf("413 body %q has no actionable message", over.Body)
	}
	if got.Load() != -1 {
		t.Fatalf("upstream saw a refused body")
	}
}

// TestIdleTimeout: an upstream that goes quiet mid-stream is abandoned
// after the idle timeout (not a total deadline): the client sees the cut,
// the upstream sees its request cancelled, the record says idle_timeout.
func TestIdleTimeout(t *testing.T) {
	e := newEnv(t, func(o *proxy.Options) { o.IdleTimeout = time.Second })
	hdr := map[string]string{llmtest.HeaderFault: "hang_after=3,chunk_delay=10ms", "User-Agent": "idle"}
	r := do(t, "POST", e.Proxy.URL+"/v1/chat/completions", hdr, chatBody(true))
	if r.Err == nil {
		t.Fatalf("client read a complete stream from a hung upstream: %q", r.Body)
	}
	if n := bytes.Count(r.Body, []byte("\n\n")); n != 3 {
		t.Errorf("client got %d events before the cut, want 3", n)
	}
	select {
	case <-e.Up.Canceled():
	case <-time.After(10 * time.Second):
		t.Fatal("upstream request not cancelled")
	}
	if c := e.Sink.ForHarness(t, "idle"); c.EndReason != recorder.EndIdleTimeout {
		t.Fatalf("end_reason %q, want idle_timeout", c.EndReason)
	}
}
