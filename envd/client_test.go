package envd_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/client"
)

// TestClientStreamReattach cuts the first stream's connection after its
// first event; the client must reattach by exec id and deliver every
// event exactly once.
func TestClientStreamReattach(t *testing.T) {
	t.Parallel()
	f := newFixture(t, envd.Options{}, "")
	target, _ := url.Parse(f.url)
	var cut atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host, out.RequestURI = target.Scheme, target.Host, ""
		res, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			w.WriteHeader(502)
			return
		}
		defer res.Body.Close()
		for k, v := range res.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(res.StatusCode)
		if strings.HasSuffix(r.URL.Path, "/exec") && cut.CompareAndSwap(false, true) {
			br := bufio.NewReader(res.Body)
			for { // copy the first event (up to its blank line), then drop the connection
				line, err := br.ReadString('\n')
				_, _ = io.WriteString(w, line)
				if err != nil || line == "\n" {
					break
				}
			}
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		}
		_, _ = io.Copy(w, res.Body)
	}))
	defer front.Close()
	c := client.New(client.Options{BaseURL: front.URL})
	ctx := context.Background()
	sb, err := c.Create(ctx, envd.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sb.ExecStream(ctx, envd.ExecRequest{Shell: "echo a; echo b >&2; echo c"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	res, err := st.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !cut.Load() || res.Stdout != "a\nc\n" || res.Stderr != "b\n" || res.ExitCode != 0 {
		t.Errorf("after reattach: cut=%v %+v", cut.Load(), res)
	}
}

// TestClientRetriesDial starts envd only after the client's first dial
// failed: the create is retried and succeeds.
func TestClientRetriesDial(t *testing.T) {
	t.Parallel()
	f := newFixture(t, envd.Options{}, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: the first dial is refused
	var dials atomic.Int32
	started := make(chan struct{})
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		if dials.Add(1) == 1 {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			close(started)
			return c, err
		}
		return (&net.Dialer{}).DialContext(ctx, network, strings.TrimPrefix(f.url, "http://"))
	}}}
	c := client.New(client.Options{BaseURL: "http://" + addr, HTTP: hc})
	if _, err := c.Create(context.Background(), envd.Spec{}); err != nil {
		t.Fatalf("Create with one refused dial: %v", err)
	}
	<-started
	if got := dials.Load(); got != 2 {
		t.Errorf("dials = %d, want 2", got)
	}
}

// TestClientStreamIdle: a stream that sends nothing fails after
// StreamIdle instead of hanging.
func TestClientStreamIdle(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Exec-Id", "x-1")
		w.WriteHeader(200)
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer silent.Close()
	defer close(release)
	c := client.New(client.Options{BaseURL: silent.URL, StreamIdle: 50 * time.Millisecond, Retries: 1})
	st, err := c.Sandbox("sb-x").ExecStream(context.Background(), envd.ExecRequest{Shell: "true"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = st.Next()
	if err == nil || !strings.Contains(err.Error(), "idle") {
		t.Errorf("Next on a silent stream = %v, want an idle error", err)
	}
	if errors.Is(err, io.EOF) {
		t.Errorf("idle stream reported as clean EOF")
	}
}
