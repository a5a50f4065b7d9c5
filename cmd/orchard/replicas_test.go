package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/internal/redistest"
	"github.com/orchard-rl/orchard/proxy/episodes"
	"github.com/orchard-rl/orchard/proxy/proxytest"
	"github.com/orchard-rl/orchard/recorder"
)

// TestTwoReplicas: two proxies share Redis and the token secret, in secure
// mode. An episode created on one is served and finished on the other.
func TestTwoReplicas(t *testing.T) {
	rs := redistest.NewServer(t)
	up := llmtest.NewServer(llmtest.Options{})
	defer up.Close()
	const admin = "replica-admin-token"
	const key = "sk-UPSTREAM-never-leaves-4711"
	var logs syncBuffer
	spills := []string{t.TempDir(), t.TempDir()}
	startReplica := func(i int) (string, func()) {
		cfg := &proxyConfig{Listen: "127.0.0.1:0", Upstream: up.URL() + "/v1", Redis: rs.URL(), IdleTimeout: time.Minute,
			MaxBody: 1 << 20, Auth: "required", TokenSecret: "shared-secret-of-all-replicas", AdminToken: admin, TokenTTL: time.Hour,
			UpstreamKey: key}
		t.Setenv("ORCHARD_SPILL_DIR", spills[i])
		ctx, stop := context.WithCancel(context.Background())
		ready, done := make(chan string, 1), make(chan error, 1)
		lg := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		go func() { done <- runProxy(ctx, cfg, lg, ready) }()
		return "http://" + <-ready, func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("replica: %v", err)
			}
		}
	}
	a, stopA := startReplica(0)
	defer stopA()
	b, stopB := startReplica(1)
	defer stopB()
	auth := map[string]string{"Authorization": "Bearer " + admin}

	r := proxytest.Do(t, "POST", a+"/orchard/v1/episodes", auth, []byte(`{"task_id":"t-rep"}`))
	if r.Status != http.StatusCreated {
		t.Fatalf("create on A: %d %s", r.Status, r.Body)
	}
	var ep episodes.Created
	json.Unmarshal(r.Body, &ep)
	call := proxytest.Do(t, "POST", b+"/e/"+ep.ID+"/v1/chat/completions", map[string]string{"Authorization": "Bearer " + ep.Token},
		[]byte(`{"model":"text","messages":[{"role":"user","content":"hi"}]}`))
	if call.Status != 200 {
		t.Fatalf("call on B with A's token: %d %s", call.Status, call.Body)
	}
	if r := proxytest.Do(t, "POST", b+"/orchard/v1/episodes/"+ep.ID+"/finish", auth, []byte(`{"reward":1,"status":"success"}`)); r.Status != 200 {
		t.Fatalf("finish on B: %d %s", r.Status, r.Body)
	}
	// The call's record reaches Redis asynchronously.
	var sum recorder.EpisodeSummary
	for try := 0; ; try++ {
		got := proxytest.Do(t, "GET", a+"/orchard/v1/episodes/"+ep.ID, auth, nil)
		json.Unmarshal(got.Body, &sum)
		if sum.Calls == 1 {
			break
		}
		if try == 500 {
			t.Fatalf("episode on A: %s", got.Body)
		}
		waitABit()
	}
	if sum.Status != recorder.StatusSuccess || sum.Reward == nil || *sum.Reward != 1 {
		t.Fatalf("episode on A after finish on B: %+v", sum)
	}
	if got := up.Requests()[0].Header.Get("Authorization"); got != "Bearer "+key {
		t.Fatalf("upstream got %q", got)
	}
	full := proxytest.Do(t, "GET", a+"/orchard/v1/episodes/"+ep.ID+"?calls=true", auth, nil)
	metrics := proxytest.Do(t, "GET", b+"/metrics", nil, nil)
	where := map[string][]byte{"episode API": full.Body, "metrics": metrics.Body, "logs": logs.Bytes(),
		"client reply": call.Body, "redis": redisDump(t, rs.URL())}
	for _, dir := range spills {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			where["spill "+filepath.Base(f)] = b
		}
	}
	for name, b := range where {
		if bytes.Contains(b, []byte(key)) {
			t.Errorf("the upstream key appears in %s", name)
		}
	}
	// The finished episode's token is refused on both replicas (A learns
	// it within runningRecheck).
	for _, base := range []string{b, a} {
		for try := 0; ; try++ {
			r := proxytest.Do(t, "POST", base+"/e/"+ep.ID+"/v1/chat/completions", map[string]string{"Authorization": "Bearer " + ep.Token},
				[]byte(`{"model":"text","messages":[{"role":"user","content":"again"}]}`))
			if r.Status == http.StatusUnauthorized {
				break
			}
			if try == 300 {
				t.Fatalf("%s still accepts a finished episode's token: %d", base, r.Status)
			}
			waitABit()
		}
	}
}

// redisDump returns every key and value in the Redis at url, raw.
func redisDump(t *testing.T, url string) []byte {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx := context.Background()
	var out bytes.Buffer
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	n := 0
	for iter.Next(ctx) {
		k := iter.Val()
		n++
		out.WriteString(k + "\n")
		v, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("dump %s: %v", k, err)
		}
		out.WriteString(v)
	}
	if err := iter.Err(); err != nil || n == 0 {
		t.Fatalf("scan: %v (%d keys)", err, n)
	}
	return out.Bytes()
}

// syncBuffer is a bytes.Buffer for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}
