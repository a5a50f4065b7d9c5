package local

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/client"
)

// serveModeEnv makes the test binary run envd (local backend) on a
// loopback port with the state dir in its value, print the URL, and
// serve until killed: the crash test kills it with SIGKILL.
const serveModeEnv = "ORCHARD_ENVD_TEST_SERVE"

// testOptions returns backend options that run the test binary itself as
// the agent, with cgroups under a parent unique to this process.
func testOptions(stateDir string) Options {
	return Options{
		StateDir:     stateDir,
		AgentPath:    os.Args[0],
		AgentArgs:    []string{},
		AgentEnv:     []string{agentModeEnv + "=1"},
		CgroupParent: fmt.Sprintf("orchard-test-%d", os.Getpid()),
	}
}

// stateDir returns a temporary state dir whose ancestors the sandbox
// user can search (t.TempDir makes them 0700): bubblewrap runs as that
// user when the tests run as root.
func stateDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{d, filepath.Dir(d)} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func newBackend(t testing.TB) *Backend {
	t.Helper()
	b, err := New(testOptions(stateDir(t)))
	if err != nil {
		t.Skipf("local backend unavailable: %v", err)
	}
	return b
}

// env is one envd (manager + HTTP API over a real socket) on a backend.
type env struct {
	b   *Backend
	m   *envd.Manager
	url string
	c   *client.Client
}

// newEnv serves envd over httptest; cleanup deletes all sandboxes.
func newEnv(t testing.TB, opts envd.Options) *env {
	t.Helper()
	return newEnvOn(t, newBackend(t), opts)
}

// newEnvOn is newEnv on a given backend.
func newEnvOn(t testing.TB, b *Backend, opts envd.Options) *env {
	t.Helper()
	opts.Backend, opts.BackendName = b, "local"
	m := envd.NewManager(opts)
	ts := httptest.NewServer(envd.NewServer(envd.ServerOptions{Manager: m}))
	t.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = m.Start(ctx) // canceled: deletes every live sandbox, then returns
	})
	return &env{b: b, m: m, url: ts.URL, c: client.New(client.Options{BaseURL: ts.URL})}
}

// create makes a sandbox and registers its deletion.
func (e *env) create(t testing.TB, spec envd.Spec) *client.Sandbox {
	t.Helper()
	sb, err := e.c.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb
}

func run(t testing.TB, sb *client.Sandbox, shell string) *envd.ExecResult {
	t.Helper()
	res, err := sb.Exec(context.Background(), envd.ExecRequest{Shell: shell})
	if err != nil {
		t.Fatalf("Exec(%q): %v", shell, err)
	}
	return res
}

// runServe is the body of the test binary in serve mode.
func runServe() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	opts := testOptions(os.Getenv(serveModeEnv))
	opts.CgroupParent = os.Getenv("ORCHARD_ENVD_TEST_CGROUP")
	b, err := New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	m := envd.NewManager(envd.Options{Backend: b, Logger: slog.New(slog.DiscardHandler)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Handler: envd.NewServer(envd.ServerOptions{Manager: m}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() { _ = m.Start(ctx) }()
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "http://%s\n", ln.Addr())
	w.Flush()
	<-ctx.Done()
	return 0
}

// enforces reports whether limits of controller ctl are applied.
func (c *cgroups) enforces(ctl string) bool {
	if c == nil {
		return false
	}
	_, missing := c.missing[ctl]
	return !missing
}

// childrenOf lists descendants of pid from /proc/PID/task/*/children.
func childrenOf(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
				out = append(out, childrenOf(c)...)
			}
		}
	}
	return out
}
