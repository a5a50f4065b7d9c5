package main

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/proxy/proxytest"
)

// plantSegmentPoison appends to the newest segment of the embedded store in
// dir a call frame of episode ep that indexes but does not decode. It
// writes the frame format of docs/recorder-embedded.md by hand: length,
// CRC-32C, then 'c', episode, call id, start time and a garbage body.
func plantSegmentPoison(t *testing.T, dir, ep, callID string) {
	t.Helper()
	p := []byte{'c'}
	p = binary.AppendUvarint(p, uint64(len(ep)))
	p = append(p, ep...)
	p = binary.AppendUvarint(p, uint64(len(callID)))
	p = append(p, callID...)
	p = binary.AppendVarint(p, time.Now().UnixNano())
	p = append(p, "\xff\xfe not a packed call"...)
	frame := binary.LittleEndian.AppendUint32(nil, uint32(len(p)))
	frame = binary.LittleEndian.AppendUint32(frame, crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)))
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) == 0 {
		t.Fatalf("no segments in %s", dir)
	}
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(frame, p...)); err != nil {
		t.Fatal(err)
	}
}

// TestPoisonedRecordCLI: with an undecodable record planted in an episode,
// `episodes show` shows the good calls and names the poison, export skips
// it with a count and exits 0, `export --strict` exits 1, and a proxy
// started on the store records new calls of that episode.
func TestPoisonedRecordCLI(t *testing.T) {
	up := llmtest.NewServer(llmtest.Options{})
	defer up.Close()
	data := t.TempDir()
	call := func(ua string) {
		cfg := &proxyConfig{Listen: "127.0.0.1:0", Upstream: up.URL() + "/v1", Data: data, IdleTimeout: time.Minute, MaxBody: 1 << 20}
		ctx, stop := context.WithCancel(context.Background())
		ready, done := make(chan string, 1), make(chan error, 1)
		go func() { done <- runProxy(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
		body := []byte(`{"model":"text","messages":[{"role":"user","content":"hi ` + ua + `"}]}`)
		if r := proxytest.Do(t, "POST", "http://"+<-ready+"/e/ep-poison/v1/chat/completions", map[string]string{"User-Agent": ua}, body); r.Status != 200 {
			t.Fatalf("call %s: %d %s", ua, r.Status, r.Body)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	call("before")
	plantSegmentPoison(t, data, "ep-poison", "call-poison")
	call("after") // the proxy's dedup rebuild meets the poison

	out, err := runCLI(t, "episodes", "show", "ep-poison", "--data", data)
	if err != nil {
		t.Fatalf("episodes show: %v\n%s", err, out)
	}
	if !strings.Contains(out, "calls 2") || !strings.Contains(out, "quarantined record 2") || !strings.Contains(out, "call-poison") {
		t.Fatalf("episodes show does not show 2 good calls and the poison:\n%s", out)
	}
	out, err = runCLI(t, "export", "--data", data, "--format", "turns", "--out", filepath.Join(t.TempDir(), "x.jsonl"))
	if err != nil || !strings.Contains(out, "skipped 1 quarantined record(s) in 1 episode(s)") {
		t.Fatalf("export: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "export", "--data", data, "--strict", "--out", filepath.Join(t.TempDir(), "y.jsonl")); err == nil {
		t.Fatalf("export --strict succeeded with a poisoned record:\n%s", out)
	}
}
