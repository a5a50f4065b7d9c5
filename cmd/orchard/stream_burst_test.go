package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// burstEvents returns n chat completion chunks, numbered from first, of
// about 300 bytes each.
func burstEvents(first, n int) []byte {
	var b bytes.Buffer
	for i := first; i < first+n; i++ {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-burst","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"word %03d %s"},"logprobs":null,"finish_reason":null}]}`+"\n\n",
			i, strings.Repeat("x", 140))
	}
	return b.Bytes()
}

// TestStreamBurstsArriveWhole runs `orchard proxy` in front of an upstream
// that sends its events in bursts past the server's 4 KiB connection
// buffer, waiting between bursts until the client has read the last one
// whole: the proxy gathers what the server writes of a burst into one
// write, and this shows that it holds back no byte of the events for it,
// and that the stream arrives byte for byte.
func TestStreamBurstsArriveWhole(t *testing.T) {
	bursts := [][]byte{burstEvents(0, 40), burstEvents(40, 1), burstEvents(41, 60), burstEvents(101, 30), []byte("data: [DONE]\n\n")}
	next := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		rc.Flush()
		for _, b := range bursts {
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
			w.Write(b)
			rc.Flush()
		}
	}))
	defer up.Close()
	cfg := &proxyConfig{Listen: "127.0.0.1:0", Upstream: up.URL + "/v1", UpstreamKind: "openai", Data: t.TempDir(), IdleTimeout: time.Minute, MaxBody: 1 << 20}
	addr, stop := startProxy(t, cfg)
	defer stop()

	// A burst held back makes the read below wait until this deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/e/ep-burst/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for i, b := range bursts {
		next <- struct{}{}
		got := make([]byte, len(b))
		if _, err := io.ReadFull(resp.Body, got); err != nil {
			t.Fatalf("burst %d (%d bytes): %v", i, len(b), err)
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("burst %d differs from what the upstream sent", i)
		}
	}
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) > 0 {
		t.Fatalf("after the last burst: %q, %v; want the end of the stream", rest, err)
	}
}
