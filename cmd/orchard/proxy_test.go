package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/proxy/proxytest"
	"github.com/orchard-rl/orchard/recorder"
)

// runCLI runs the orchard command line in-process and returns its stdout.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestProxyRecordsAndCLIReads runs `orchard proxy` on the embedded store,
// makes calls through it, and reads them back with `orchard episodes`
// while the proxy is still running, then again after it shut down.
func TestProxyRecordsAndCLIReads(t *testing.T) {
	up := llmtest.NewServer(llmtest.Options{})
	defer up.Close()
	data := t.TempDir()
	cfg := &proxyConfig{Listen: "127.0.0.1:0", Upstream: up.URL() + "/v1", UpstreamKind: "vllm", Data: data, IdleTimeout: 60e9, MaxBody: 1 << 20}
	ctx, stop := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- runProxy(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	addr := <-ready

	body := []byte(`{"model":"tools","stream":true,"messages":[{"role":"user","content":"weather?"}]}`)
	for i := range 3 {
		ep := "ep-cli-a"
		if i == 2 {
			ep = "ep-cli-b"
		}
		r := proxytest.Do(t, "POST", "http://"+addr+"/e/"+ep+"/v1/chat/completions", nil, body)
		if r.Status != 200 || r.Err != nil {
			t.Fatalf("call %d: %d %v", i, r.Status, r.Err)
		}
	}
	// Records reach the store asynchronously: poll the CLI, as a user would.
	var out string
	for try := 0; ; try++ {
		var err error
		out, err = runCLI(t, "episodes", "show", "ep-cli-a", "--json", "--data", data)
		if err == nil && strings.Count(out, "\n") == 2 {
			break
		}
		if try == 500 {
			t.Fatalf("episodes show while the proxy runs: %v\n%s", err, out)
		}
		waitABit()
	}
	var calls []recorder.Call
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var c recorder.Call
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
	if calls[0].Seq != 1 || calls[1].Seq != 2 || calls[0].Tokens == nil || calls[1].Lineage == nil {
		t.Fatalf("calls: seq %d,%d tokens %v lineage %v", calls[0].Seq, calls[1].Seq, calls[0].Tokens, calls[1].Lineage)
	}
	if calls[1].Lineage.Kind != recorder.LineageRetry {
		t.Errorf("second identical call lineage %q, want retry", calls[1].Lineage.Kind)
	}

	stop()
	if err := <-done; err != nil {
		t.Fatalf("proxy: %v", err)
	}
	list, err := runCLI(t, "episodes", "list", "--data", data)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ep-cli-a", "ep-cli-b"} {
		if !strings.Contains(list, want) {
			t.Errorf("episodes list lacks %s:\n%s", want, list)
		}
	}
	show, err := runCLI(t, "episodes", "show", "ep-cli-a", "--data", data)
	if err != nil || !strings.Contains(show, "lineage root 1, retry 1") {
		t.Errorf("episodes show: %v\n%s", err, show)
	}
	if _, err := runCLI(t, "episodes", "show", "nope", "--data", data); err == nil {
		t.Error("episodes show of an unknown episode succeeded")
	}
}
