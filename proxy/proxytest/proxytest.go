// Package proxytest runs the recording proxy in front of the scripted
// upstream (internal/llmtest) over real loopback sockets, for tests of the
// proxy and of everything built on it.
package proxytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/tidwall/sjson"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/recorder"
)

// Sink collects records in the order the proxy hands them over. It is a
// [proxy.Sink]; read it from one goroutine. Every record it takes must
// keep the promise of [recorder.Call.Checked] (Request and Response each
// empty or one valid JSON value); a test that reads one that does not
// fails.
type Sink struct {
	ch    chan *recorder.Call
	stash []*recorder.Call // records passed over by ForHarness
	bad   chan string      // broken Checked promises, reported by Next and ForHarness
}

// NewSink returns an empty Sink.
func NewSink() *Sink {
	return &Sink{ch: make(chan *recorder.Call, 4096), bad: make(chan string, 4096)}
}

// Record implements [proxy.Sink].
func (s *Sink) Record(c *recorder.Call) {
	validOrEmpty := func(b []byte) bool { return len(b) == 0 || json.Valid(b) }
	why := ""
	switch {
	case !c.Checked:
		why = c.CallID + ": Checked is false"
	case !validOrEmpty(c.Request):
		why = fmt.Sprintf("%s: Checked, but the request is not valid JSON: %.200q", c.CallID, c.Request)
	case !validOrEmpty(c.Response):
		why = fmt.Sprintf("%s: Checked, but the response is not valid JSON: %.200q", c.CallID, c.Response)
	}
	if why != "" {
		select {
		case s.bad <- why:
		default: // thousands already wait to be reported; never block the proxy
		}
	}
	s.ch <- c
}

// broken fails t with the broken Checked promises seen so far.
func (s *Sink) broken(t testing.TB) {
	t.Helper()
	for {
		select {
		case why := <-s.bad:
			t.Errorf("record %s", why)
		default:
			return
		}
	}
}

// Pending reports how many records arrived that no call has taken yet.
func (s *Sink) Pending() int { return len(s.ch) + len(s.stash) }

// Next returns the next record. Its timeout only turns a hang into a
// failure; it is not synchronisation.
func (s *Sink) Next(t testing.TB) *recorder.Call {
	t.Helper()
	defer s.broken(t)
	if len(s.stash) > 0 {
		c := s.stash[0]
		s.stash = s.stash[1:]
		return c
	}
	select {
	case c := <-s.ch:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no record within 10s")
		return nil
	}
}

// ForHarness returns the record of the call made with User-Agent ua.
// Records are assembled off the request path, so they may arrive in
// another order than the calls were answered.
func (s *Sink) ForHarness(t testing.TB, ua string) *recorder.Call {
	t.Helper()
	defer s.broken(t)
	for i, c := range s.stash {
		if c.Harness == ua {
			s.stash = append(s.stash[:i:i], s.stash[i+1:]...)
			return c
		}
	}
	for {
		select {
		case c := <-s.ch:
			if c.Harness == ua {
				return c
			}
			s.stash = append(s.stash, c)
		case <-time.After(10 * time.Second):
			t.Fatalf("no record for %q within 10s", ua)
			return nil
		}
	}
}

// Env is a scripted upstream with the proxy in front of it, both on
// loopback, closed when the test ends.
type Env struct {
	Up      *llmtest.Server
	Handler *proxy.Handler
	Proxy   *httptest.Server
	Sink    *Sink
}

// New starts an Env on the scripts in testdata/llm; mod, if not nil,
// adjusts the proxy's options.
func New(t testing.TB, mod func(*proxy.Options)) *Env {
	t.Helper()
	return NewWith(t, llmtest.Options{}, mod)
}

// NewWith is [New] with the scripted upstream's options given.
func NewWith(t testing.TB, up llmtest.Options, mod func(*proxy.Options)) *Env {
	t.Helper()
	return NewWrapped(t, up, mod, nil)
}

// NewWrapped is [NewWith] with the listener serving wrap(proxy) instead
// of the proxy, as cmd/orchard mounts the episode API beside it; nil wrap
// serves the proxy alone.
func NewWrapped(t testing.TB, up llmtest.Options, mod func(*proxy.Options), wrap func(proxy http.Handler) http.Handler) *Env {
	t.Helper()
	e := &Env{Up: llmtest.NewServer(up), Sink: NewSink()}
	opts := proxy.Options{Upstream: &proxy.Upstream{BaseURL: MustURL(t, e.Up.URL()+"/v1")}, Sink: e.Sink}
	if mod != nil {
		mod(&opts)
	}
	e.Handler = proxy.New(opts)
	if err := e.Handler.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	var h http.Handler = e.Handler
	if wrap != nil {
		h = wrap(h)
	}
	e.Proxy = httptest.NewServer(h)
	t.Cleanup(func() {
		e.Proxy.Close()
		e.Handler.Close()
		e.Up.Close()
	})
	return e
}

// AsProxied returns the body the upstream got for the call made with
// User-Agent ua, made non-streaming: asked directly, the upstream answers
// with what the record must hold, injected fields included.
func (e *Env) AsProxied(t testing.TB, ua string) []byte {
	t.Helper()
	for _, r := range slices.Backward(e.Up.Requests()) {
		if r.Header.Get("User-Agent") != ua {
			continue
		}
		b, err := sjson.DeleteBytes(r.Body, "stream_options")
		if err == nil {
			b, err = sjson.SetBytes(b, "stream", false)
		}
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("upstream saw no request from %q", ua)
	return nil
}

// Reply is what a client got.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
	Err    error // from the round trip or from reading the body
}

// Do sends one request on a fresh connection (so that connection reuse
// cannot hide a cut stream) and reads the whole answer.
func Do(t testing.TB, method, u string, hdr map[string]string, body []byte) Reply {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	res, err := tr.RoundTrip(req)
	if err != nil {
		return Reply{Err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return Reply{Status: res.StatusCode, Header: res.Header, Body: b, Err: err}
}

// MustURL parses s or fails the test.
func MustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
