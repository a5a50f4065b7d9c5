package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/proxy/proxytest"
)

// TestRecordThenExport: an agent loop of two turns goes through `orchard
// proxy` against a vLLM-style upstream; `orchard export --check` turns the
// episode into one trajectory whose input ids are the last prompt plus its
// completion and whose loss mask covers exactly the generated tokens.
func TestRecordThenExport(t *testing.T) {
	script := &llmtest.Script{Turns: []llmtest.Turn{
		{PromptTokenIDs: []int64{1, 2, 3}, Choice: llmtest.Choice{Content: llmtest.Pieces{"Let", " me"}, TokenIDs: []int64{10, 11}}},
		{PromptTokenIDs: []int64{1, 2, 3, 10, 11, 20, 21}, Choice: llmtest.Choice{Content: llmtest.Pieces{"Done"}, TokenIDs: []int64{12}}},
	}}
	up := llmtest.NewServer(llmtest.Options{Scripts: map[string]*llmtest.Script{"agent": script}})
	defer up.Close()
	data := t.TempDir()
	cfg := &proxyConfig{Listen: "127.0.0.1:0", Upstream: up.URL() + "/v1", UpstreamKind: "vllm", Data: data, IdleTimeout: time.Minute, MaxBody: 1 << 20}
	ctx, stop := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- runProxy(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	base := "http://" + <-ready + "/e/ep-export/v1/chat/completions"

	msgs := []any{map[string]any{"role": "user", "content": "fix it"}}
	r := proxytest.Do(t, "POST", base, nil, mustMarshal(t, map[string]any{"model": "agent", "stream": true, "messages": msgs}))
	if r.Status != 200 {
		t.Fatalf("turn 1: %d", r.Status)
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": "Let me"}, map[string]any{"role": "user", "content": "go on"})
	if r := proxytest.Do(t, "POST", base, nil, mustMarshal(t, map[string]any{"model": "agent", "stream": true, "messages": msgs})); r.Status != 200 {
		t.Fatalf("turn 2: %d", r.Status)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "traj.jsonl")
	if msg, err := runCLI(t, "export", "--data", data, "--format", "trajectories", "--check", "--out", out); err != nil {
		t.Fatalf("export --check: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d trajectories, want 1:\n%s", len(lines), b)
	}
	tok := gjson.Get(lines[0], "tokens")
	ids, mask := ints(tok.Get("input_ids")), ints(tok.Get("loss_mask"))
	if want := []int64{1, 2, 3, 10, 11, 20, 21, 12}; !slices.Equal(ids, want) {
		t.Fatalf("input_ids %v, want %v", ids, want)
	}
	if want := []int64{0, 0, 0, 1, 1, 0, 0, 1}; !slices.Equal(mask, want) {
		t.Fatalf("loss_mask %v, want %v", mask, want)
	}
	if _, err := runCLI(t, "export", "--data", data, "--format", "nope"); err == nil {
		t.Error("export with an unknown format succeeded")
	}
	checkTrainerExport(t, data)
}

func ints(r gjson.Result) []int64 {
	var out []int64
	for _, v := range r.Array() {
		out = append(out, v.Int())
	}
	return out
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
