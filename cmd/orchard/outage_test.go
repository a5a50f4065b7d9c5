package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/internal/redistest"
	"github.com/orchard-rl/orchard/proxy/proxytest"
	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/redisstore"
)

// startProxy runs runProxy on cfg and returns its address and a stop func
// that returns runProxy's error.
func startProxy(t *testing.T, cfg *proxyConfig) (string, func() error) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- runProxy(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	select {
	case addr := <-ready:
		return addr, func() error { stop(); return <-done }
	case err := <-done:
		stop()
		t.Fatalf("proxy did not start: %v", err)
		return "", nil
	}
}

// TestStartWithRedisDown: the proxy starts and serves while Redis is
// stopped, spilling its calls; once Redis is started they are replayed and
// every one of them is stored.
func TestStartWithRedisDown(t *testing.T) {
	rs := redistest.NewServer(t)
	if err := rs.Stop(); err != nil {
		t.Fatal(err)
	}
	up := llmtest.NewServer(llmtest.Options{})
	defer up.Close()
	cfg := &proxyConfig{Listen: "127.0.0.1:0", Upstream: up.URL() + "/v1", Redis: rs.URL(), Data: t.TempDir(), IdleTimeout: time.Minute, MaxBody: 1 << 20}
	addr, stop := startProxy(t, cfg)
	for i := range 5 {
		body := fmt.Appendf(nil, `{"model":"text","messages":[{"role":"user","content":"call %d"}]}`, i)
		if r := proxytest.Do(t, "POST", "http://"+addr+"/e/ep-down/v1/chat/completions", nil, body); r.Status != 200 {
			t.Fatalf("call %d with Redis down: %d %s", i, r.Status, r.Body)
		}
	}
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil { // shutdown replays the spill into the now-answering Redis
		t.Fatal(err)
	}
	st, err := redisstore.Open(context.Background(), rs.URL(), redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	calls, err := st.Calls(context.Background(), "ep-down")
	if err != nil || len(calls) != 5 {
		t.Fatalf("stored %d calls (%v), want 5", len(calls), err)
	}
}

// TestTwoProxiesOneWorkingDir: a second proxy started in the same working
// directory with the same settings refuses to start, saying the spill dir
// is taken, instead of sharing the spill file and losing records.
func TestTwoProxiesOneWorkingDir(t *testing.T) {
	rs := redistest.NewServer(t)
	up := llmtest.NewServer(llmtest.Options{})
	defer up.Close()
	t.Chdir(t.TempDir())
	os.Unsetenv("ORCHARD_SPILL_DIR")
	cfg := func() *proxyConfig {
		return &proxyConfig{Listen: "127.0.0.1:0", Upstream: up.URL() + "/v1", Redis: rs.URL(), IdleTimeout: time.Minute, MaxBody: 1 << 20}
	}
	_, stop := startProxy(t, cfg())
	defer stop()
	err := runProxy(context.Background(), cfg(), slog.New(slog.DiscardHandler), nil)
	if err == nil || !strings.Contains(err.Error(), "--spill-dir") || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second proxy in one directory: %v, want a clear spill-dir-in-use error", err)
	}
	if !errors.Is(err, recorder.ErrSpillLocked) {
		t.Fatalf("error %v does not wrap ErrSpillLocked", err)
	}
}

// TestSlowClients: a client that stalls in its headers, one that stalls in
// its body and an idle keep-alive connection are closed by the limits,
// while a slow stream that outlives all three limits is delivered whole.
func TestSlowClients(t *testing.T) {
	up := llmtest.NewServer(llmtest.Options{})
	defer up.Close()
	cfg := &proxyConfig{Listen: "127.0.0.1:0", Upstream: up.URL() + "/v1", Data: t.TempDir(), IdleTimeout: time.Minute, MaxBody: 1 << 20,
		serverLimits: serverLimits{HeaderTimeout: 500 * time.Millisecond, BodyTimeout: 500 * time.Millisecond, ConnIdle: 500 * time.Millisecond}}
	addr, stop := startProxy(t, cfg)
	defer stop()
	for _, tc := range []struct{ name, send, wantPrefix string }{
		{"stalled headers", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", ""},
		{"stalled body", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"model\"", "HTTP/1.1 408"},
		{"idle keep-alive", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tc.send)
			c.SetReadDeadline(time.Now().Add(time.Minute)) // a backstop: the proxy must close first
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("connection not closed by the proxy: %v", err)
			}
			if !strings.HasPrefix(string(got), tc.wantPrefix) {
				t.Fatalf("got %q, want a reply starting %q", got, tc.wantPrefix)
			}
		})
	}
	// A stream whose chunks come 200 ms apart for ~2 s: longer than every
	// limit above, shorter than the upstream idle timeout.
	body := `{"model":"text","stream":true,"messages":[{"role":"user","content":"slow"}]}`
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("X-Llmtest-Fault", "chunk_delay=200ms")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	done := false
	for sc.Scan() {
		done = done || sc.Text() == "data: [DONE]"
	}
	if !done {
		t.Fatalf("slow stream cut before [DONE]: %v", sc.Err())
	}
}
