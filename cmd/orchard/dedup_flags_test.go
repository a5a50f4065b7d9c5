package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/internal/redistest"
	"github.com/orchard-rl/orchard/proxy/proxytest"
)

// TestDedupBoundsReachTheStore: --dedup-episodes bounds the episodes whose
// dedup state the store keeps, as its metrics report it, on either store,
// and an episode let go and written again counts as a rebuild.
func TestDedupBoundsReachTheStore(t *testing.T) {
	for _, redis := range []bool{false, true} {
		name := "embedded"
		if redis {
			name = "redis"
		}
		t.Run(name, func(t *testing.T) {
			up := llmtest.NewServer(llmtest.Options{})
			defer up.Close()
			cfg := &proxyConfig{Listen: "127.0.0.1:0", Upstream: up.URL() + "/v1", UpstreamKind: "openai", Data: t.TempDir(),
				IdleTimeout: time.Minute, MaxBody: 1 << 20, DedupEpisodes: 2}
			if redis {
				cfg.Redis = redistest.NewServer(t).URL()
			}
			ctx, stop := context.WithCancel(context.Background())
			ready := make(chan string, 1)
			done := make(chan error, 1)
			go func() { done <- runProxy(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
			base := "http://" + <-ready
			body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			var page string
			for i, ep := range []string{"ep-a", "ep-b", "ep-c", "ep-a"} {
				if r := proxytest.Do(t, "POST", base+"/e/"+ep+"/v1/chat/completions", nil, body); r.Status != 200 || r.Err != nil {
					t.Fatalf("%s: %d %v", ep, r.Status, r.Err)
				}
				// One call a store write, so that the bound acts between them.
				for try := 0; ; try++ {
					if page = string(proxytest.Do(t, "GET", base+"/metrics", nil, nil).Body); metricValue(page, "orchard_recorder_written_total") == i+1 {
						break
					}
					if try == 500 {
						t.Fatalf("call %d not written:\n%s", i+1, page)
					}
					waitABit()
				}
			}
			kept, evicted := metricValue(page, "orchard_recorder_dedup_episodes"), metricValue(page, "orchard_recorder_dedup_evictions_total")
			rebuilt := metricValue(page, "orchard_recorder_dedup_rebuilds_total")
			if kept != 2 || evicted != 2 || rebuilt != 1 {
				t.Errorf("dedup state of %d episodes kept, %d evicted, %d rebuilt; want 2, 2 and 1 "+
					"(three episodes, a bound of two, the first written again after it was let go)", kept, evicted, rebuilt)
			}
			stop()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
