package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/internal/redistest"
	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/redisstore"
)

// chaosBody is a streamed agent turn: about 20 chunks, 2 ms apart.
var chaosBody = []byte(`{"model":"tools","stream":true,"messages":[{"role":"user","content":"weather?"}]}`)

// completed is a call a client saw end with [DONE].
type completed struct {
	ua  string
	ep  string
	end time.Time
}

// streamCall makes one streamed call and reports whether the client got a
// whole stream, terminal event included.
func streamCall(ctx context.Context, client *http.Client, base, ep, ua string) error {
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/e/"+ep+"/v1/chat/completions", bytes.NewReader(chaosBody))
	req.Header.Set("User-Agent", ua)
	req.Header.Set(llmtest.HeaderFault, "chunk_delay=2ms")
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != 200 || !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) {
		return fmt.Errorf("status %d, stream %q", res.StatusCode, b[max(0, len(b)-80):])
	}
	return nil
}

// load runs n clients until ctx ends, each making calls one after another.
func load(ctx context.Context, t *testing.T, n int, base string) (done []completed, errs []error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	for i := range n {
		wg.Go(func() {
			ep := fmt.Sprintf("chaos-%02d", i)
			for j := 0; ctx.Err() == nil; j++ {
				ua := fmt.Sprintf("chaos/%d/%d", i, j)
				err := streamCall(context.Background(), client, base, ep, ua)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", ua, err))
				} else {
					done = append(done, completed{ua, ep, time.Now()})
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return done, errs
}

// waitRecorded polls the store until every completed call is recorded,
// then checks each is there exactly once.
func waitRecorded(t *testing.T, st recorder.Store, want []completed) {
	t.Helper()
	byEp := map[string]map[string]bool{}
	for _, c := range want {
		if byEp[c.ep] == nil {
			byEp[c.ep] = map[string]bool{}
		}
		byEp[c.ep][c.ua] = true
	}
	deadline := time.Now().Add(60 * time.Second)
	for ep, uas := range byEp {
		for {
			calls, err := st.Calls(context.Background(), ep)
			seen := map[string]int{}
			for _, c := range calls {
				seen[c.Harness]++
			}
			missing := 0
			for ua := range uas {
				if seen[ua] == 0 {
					missing++
				}
			}
			if err == nil && missing == 0 {
				for ua, n := range seen {
					if n != 1 {
						t.Errorf("%s recorded %d times", ua, n)
					}
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("episode %s: %d of %d completed calls missing from the store (err %v)", ep, missing, len(uas), err)
			}
			waitABit()
		}
	}
}

// TestChaosRedisOutage: 32 streaming clients for 20 s while Redis is
// stopped for 5 s in the middle. No client sees an error and, once Redis
// is back, the store holds exactly one record of every completed call.
func TestChaosRedisOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test takes ~30 s")
	}
	rs := redistest.NewServer(t)
	up := llmtest.NewServer(llmtest.Options{})
	defer up.Close()
	t.Setenv("ORCHARD_SPILL_DIR", t.TempDir())
	cfg := &proxyConfig{Listen: "127.0.0.1:0", Upstream: up.URL() + "/v1", Redis: rs.URL(), IdleTimeout: time.Minute, MaxBody: 1 << 20}
	pctx, stopProxy := context.WithCancel(context.Background())
	ready, proxyErr := make(chan string, 1), make(chan error, 1)
	go func() { proxyErr <- runProxy(pctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	base := "http://" + <-ready

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	outage := make(chan error, 1)
	go func() {
		time.Sleep(7 * time.Second) // the scenario's schedule, not synchronisation
		if err := rs.Stop(); err != nil {
			outage <- err
			return
		}
		time.Sleep(5 * time.Second)
		outage <- rs.Start()
	}()
	done, errs := load(ctx, t, 32, base)
	if err := <-outage; err != nil {
		t.Fatalf("redis stop/start: %v", err)
	}
	if len(errs) > 0 {
		t.Fatalf("%d client-visible errors, first: %v", len(errs), errs[0])
	}
	t.Logf("%d calls completed", len(done))
	st, err := redisstore.Open(context.Background(), rs.URL(), redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	waitRecorded(t, st, done)
	// The outage must have sent records through the spill file.
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if spilled := metricValue(string(metrics), "orchard_recorder_spilled_total"); spilled == 0 {
		t.Errorf("no record was spilled during the outage; the test did not test the spill path")
	} else {
		t.Logf("%d records spilled and replayed", spilled)
	}
	stopProxy()
	if err := <-proxyErr; err != nil {
		t.Fatalf("proxy: %v", err)
	}
}

// TestChaosProxyKilled: the proxy process is killed with SIGKILL under
// load and restarted on the same spill directory; every call that
// completed more than 1 s before the kill is in the store afterwards.
func TestChaosProxyKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test")
	}
	rs := redistest.NewServer(t)
	up := llmtest.NewServer(llmtest.Options{})
	defer up.Close()
	spill := t.TempDir()
	addr := freeAddr(t)
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "proxy", "--listen", addr, "--upstream", up.URL()+"/v1", "--redis", rs.URL())
		cmd.Env = append(os.Environ(), "ORCHARD_TEST_MAIN=1", "ORCHARD_SPILL_DIR="+spill)
		var logs bytes.Buffer
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitHealthy(t, "http://"+addr, &logs)
		return cmd
	}
	proc := start()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	done, _ := load(ctx, t, 8, "http://"+addr)
	kill := time.Now()
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proc.Wait()
	cancel()

	var before []completed
	for _, c := range done {
		if c.end.Before(kill.Add(-time.Second)) {
			before = append(before, c)
		}
	}
	if len(before) == 0 {
		t.Fatal("no call completed before the kill")
	}
	proc = start()
	defer func() { proc.Process.Signal(syscall.SIGTERM); proc.Wait() }()
	st, err := redisstore.Open(context.Background(), rs.URL(), redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t.Logf("%d calls completed more than 1s before the kill", len(before))
	waitRecorded(t, st, before)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitHealthy polls /healthz of a starting proxy process.
func waitHealthy(t *testing.T, base string, logs *bytes.Buffer) {
	t.Helper()
	for try := 0; try < 1000; try++ {
		if res, err := http.Get(base + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		waitABit()
	}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		t.Log(sc.Text())
	}
	t.Fatal("proxy process never became healthy")
}

// metricValue reads an unlabelled counter from a Prometheus text page.
func metricValue(page, name string) int {
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return int(f)
		}
	}
	return 0
}
