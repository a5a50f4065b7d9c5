package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/proxy/proxytest"
	"github.com/orchard-rl/orchard/recorder"
)

// The embedded envd of `orchard run` and `orchard rollout` runs its own
// executable as the sandbox agent: "EXE sandbox-agent --listen-fd 3 ...",
// with the environment cleared by the jail. When EXE is this test binary,
// ORCHARD_TEST_MAIN cannot reach it, so the argv says it instead: a test
// binary started as "sandbox-agent" is the orchard binary (TestMain runs
// main). No other test run starts it that way, and the product needs no
// hook: the tests exercise the exact agent path and options it uses.
func init() {
	if len(os.Args) > 1 && os.Args[1] == "sandbox-agent" {
		_ = os.Setenv("ORCHARD_TEST_MAIN", "1")
	}
}

// runStack is a scripted upstream and an `orchard proxy` on the embedded
// store with the episode API, for `orchard run` and `rollout` to use.
type runStack struct {
	up *llmtest.Server
	// onCall, when set, runs in the upstream for each request before
	// the scripted server answers it: the harness waits on its call
	// meanwhile, so the test can look at the sandbox from the host.
	onCall   atomic.Pointer[func(*http.Request)]
	proxyURL string
	admin    string
	data     string
}

// startRunStack skips when the local sandbox backend or curl (the
// harness's HTTP client) cannot run here, then starts the stack; cleanup
// stops it.
func startRunStack(t *testing.T, model string, script *llmtest.Script) *runStack {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap (bwrap) is not installed: the embedded local envd needs it")
	}
	if out, err := exec.Command("bwrap", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		t.Skipf("bubblewrap does not run here: %v: %s", err, out)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: the test harness uses it inside the sandbox (which sees the host's /usr)")
	}
	s := &runStack{admin: "run-e2e-admin-token", data: t.TempDir()}
	s.up = llmtest.NewServer(llmtest.Options{Scripts: map[string]*llmtest.Script{model: script}})
	t.Cleanup(s.up.Close)
	upURL, _ := url.Parse(s.up.URL())
	fwd := httputil.NewSingleHostReverseProxy(upURL)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f := s.onCall.Load(); f != nil {
			(*f)(r)
		}
		fwd.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	var logs syncBuffer
	lg := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := &proxyConfig{Listen: "127.0.0.1:0", Upstream: front.URL + "/v1", UpstreamKind: "vllm", Data: s.data,
		IdleTimeout: time.Minute, MaxBody: 1 << 20, AdminToken: s.admin, TokenTTL: time.Hour}
	ctx, stop := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- runProxy(ctx, cfg, lg, ready) }()
	select {
	case addr := <-ready:
		s.proxyURL = "http://" + addr
	case err := <-done:
		stop()
		t.Fatalf("proxy: %v", err)
	}
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("proxy: %v", err)
		}
		if t.Failed() {
			t.Logf("proxy logs:\n%s", logs.Bytes())
		}
	})
	return s
}

// runOrchardProc runs the orchard binary (this test binary) as its own process
// and returns its stdout, its stderr and its exit code.
func runOrchardProc(t *testing.T, ctx context.Context, args ...string) (stdout, stderr []byte, code int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "ORCHARD_TEST_MAIN=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("orchard %s: %v\nstderr:\n%s", args[0], err, errb.Bytes())
	}
	return out.Bytes(), errb.Bytes(), code
}

// episode reads an episode summary through the proxy's episode API,
// polling (bounded) until it holds want calls and is finished: calls
// reach the store asynchronously.
func (s *runStack) episode(t *testing.T, id string, want int) recorder.EpisodeSummary {
	t.Helper()
	auth := map[string]string{"Authorization": "Bearer " + s.admin}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := proxytest.Do(t, "GET", s.proxyURL+"/orchard/v1/episodes/"+id, auth, nil)
		var ep recorder.EpisodeSummary
		if r.Status == 200 && json.Unmarshal(r.Body, &ep) == nil && ep.Calls >= want && ep.Status != recorder.StatusRunning {
			return ep
		}
		if time.Now().After(deadline) {
			t.Fatalf("episode %s: want %d calls and a final status; got %d %s", id, want, r.Status, r.Body)
		}
		waitABit()
	}
}

// calls returns an episode's calls as `orchard episodes show --json` prints
// them from the store.
func (s *runStack) calls(t *testing.T, id string) []recorder.Call {
	t.Helper()
	out, err := runCLI(t, "episodes", "show", id, "--json", "--data", s.data)
	if err != nil {
		t.Fatalf("episodes show %s: %v\n%s", id, err, out)
	}
	var calls []recorder.Call
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var c recorder.Call
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("episodes show %s: %v\n%s", id, err, out)
		}
		calls = append(calls, c)
	}
	return calls
}

// assertSandboxesGone checks that nothing of any sandbox of the embedded
// envd with this state dir is left: no sandbox directory, no jail process
// (bubblewrap's command line names the state dir), no cgroup named after
// one of ids.
func assertSandboxesGone(t *testing.T, state string, ids ...string) {
	t.Helper()
	if ents, err := os.ReadDir(filepath.Join(state, "s")); err != nil || len(ents) != 0 {
		t.Errorf("state dir %s/s after the run: %d entries, %v; want empty", state, len(ents), err)
	}
	// The jail was SIGKILLed and waited for before run exited; its PID
	// namespace's init takes every process in it along. Poll briefly in
	// case the kernel is still tearing the namespace down.
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := processesMentioning(state)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("jail processes left after the run: %q", left)
			break
		}
		waitABit()
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && want[d.Name()] {
			t.Errorf("cgroup %s left after the run", p)
		}
		return nil
	})
}

// processesMentioning lists the command lines that contain s.
func processesMentioning(s string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// writeFiles writes name -> content under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
