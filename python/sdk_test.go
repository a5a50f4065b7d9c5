// Package python_test runs the Python package's unittest suite and its
// trainer examples against a real `orchard envd --backend local` and a real
// `orchard proxy` in front of a scripted upstream, and checks that the
// package installs offline into a fresh venv.
package python_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/internal/llmtest"
)

const (
	adminToken = "sdk-admin-token"
	apiKey     = "sdk-envd-key"
)

// The scripted model: two turns whose prompt ids extend the previous
// call's prompt and completion, so a trajectory holds both.
var script = &llmtest.Script{Turns: []llmtest.Turn{
	{PromptTokenIDs: []int64{1, 2, 3}, Choice: llmtest.Choice{Content: llmtest.Pieces{"I will", " look."},
		TokenIDs: []int64{10, 11}, Logprobs: []float64{-0.1, -0.2}}},
	{PromptTokenIDs: []int64{1, 2, 3, 10, 11, 4, 5}, Choice: llmtest.Choice{Content: llmtest.Pieces{"Fixed", " it", "."},
		TokenIDs: []int64{12, 13, 14}, Logprobs: []float64{-0.3, -0.4, -0.5}}},
}}

// stack is the proxy and envd processes the Python code talks to.
type stack struct {
	bin, proxyURL, envdURL string
}

func python(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python SDK tests need it")
	}
	if out, err := exec.Command(py, "-c", "import sys; assert sys.version_info >= (3, 10), sys.version").CombinedOutput(); err != nil {
		t.Skipf("python3 is older than 3.10: %s", out)
	}
	return py
}

func startStack(t *testing.T) *stack {
	t.Helper()
	if out, err := exec.Command("bwrap", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		t.Skipf("bubblewrap does not run here (the local envd backend needs it): %v: %s", err, out)
	}
	dir := t.TempDir()
	// envd's state dir must be searchable by the sandbox user (uid 65534).
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	s := &stack{bin: filepath.Join(dir, "orchard")}
	if out, err := exec.Command("go", "build", "-o", s.bin, "github.com/orchard-rl/orchard/cmd/orchard").CombinedOutput(); err != nil {
		t.Fatalf("go build orchard: %v\n%s", err, out)
	}
	up := llmtest.NewServer(llmtest.Options{Scripts: map[string]*llmtest.Script{"toy": script}})
	t.Cleanup(up.Close)
	s.proxyURL = "http://" + s.serve(t, "proxy listening", "proxy", "--listen", "127.0.0.1:0", "--upstream", up.URL()+"/v1",
		"--upstream-kind", "vllm", "--data", filepath.Join(dir, "data"), "--admin-token", adminToken)
	s.envdURL = "http://" + s.serve(t, "envd listening", "envd", "--listen", "127.0.0.1:0", "--backend", "local",
		"--proxy", s.proxyURL, "--admin-token", adminToken, "--token", apiKey, "--state-dir", filepath.Join(dir, "envd"),
		"--cgroup-parent", "-")
	return s
}

// serve starts `orchard args...` and returns the address its log line
// with msg reports; cleanup interrupts it and waits.
func (s *stack) serve(t *testing.T, msg string, args ...string) string {
	t.Helper()
	cmd := exec.Command(s.bin, args...)
	logs := &addrWriter{msg: msg, found: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(os.Environ(), "ORCHARD_ENVD_TOKEN=", "ORCHARD_ADMIN_TOKEN=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("orchard %s logs:\n%s", args[0], logs.bytes())
		}
	})
	select {
	case addr := <-logs.found:
		return addr
	case err := <-exited:
		exited <- err
		t.Fatalf("orchard %s exited: %v\n%s", args[0], err, logs.bytes())
	}
	return ""
}

// addrWriter keeps a process's logs and sends the addr= of the first
// line containing msg.
type addrWriter struct {
	msg   string
	found chan string
	mu    sync.Mutex
	buf   bytes.Buffer
	sent  bool
}

var addrRE = regexp.MustCompile(`addr=(\S+)`)

func (w *addrWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent {
		for _, line := range strings.Split(w.buf.String(), "\n") {
			if m := addrRE.FindStringSubmatch(line); m != nil && strings.Contains(line, w.msg) {
				w.sent = true
				w.found <- m[1]
				break
			}
		}
	}
	return len(p), nil
}

func (w *addrWriter) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.buf.Bytes())
}

// env is the environment the Python code runs with.
func (s *stack) env(extra ...string) []string {
	return append(os.Environ(), append([]string{
		"PYTHONPATH=src", "PYTHONDONTWRITEBYTECODE=1",
		"ORCHARD_TEST_ENVD_URL=" + s.envdURL, "ORCHARD_TEST_API_KEY=" + apiKey,
		"ORCHARD_TEST_PROXY_URL=" + s.proxyURL, "ORCHARD_TEST_ADMIN_TOKEN=" + adminToken,
		"ORCHARD_TEST_HARNESS_PYTHON=python3",
		"ORCHARD_ENVD_URL=" + s.envdURL, "ORCHARD_ENVD_TOKEN=" + apiKey,
		"ORCHARD_PROXY_URL=" + s.proxyURL, "ORCHARD_ADMIN_TOKEN=" + adminToken, "ORCHARD_MIN_CALLS=2",
		"SANDBOX_BASE_URL=", "SANDBOX_API_KEY=", "SANDBOX_PREFIX=",
	}, extra...)...)
}

func run(t *testing.T, ctx context.Context, env []string, name string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, out.Bytes(), errb.Bytes())
	}
	return out.String(), errb.String()
}

func TestPythonSDK(t *testing.T) {
	py := python(t)
	s := startStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	t.Run("unittest", func(t *testing.T) {
		_, stderr := run(t, ctx, s.env(), py, "-m", "unittest", "discover", "-s", "tests", "-t", ".", "-v")
		ran := regexp.MustCompile(`(?m)^Ran (\d+) tests? in`).FindStringSubmatch(stderr)
		if ran == nil || ran[1] != "12" || !strings.Contains(stderr, "\nOK\n") || strings.Contains(stderr, "skipped") {
			t.Errorf("unittest: want 12 tests run, OK, none skipped; got:\n%s", stderr)
		}
	})
	t.Run("examples", func(t *testing.T) {
		want := map[string]string{
			"verl_agent_loop.py": `{"prompt_ids": [1, 2, 3], "response_ids": [10, 11, 4, 5, 12, 13, 14], "response_mask": [1, 1, 0, 0, 1, 1, 1], "response_logprobs": [-0.1, -0.2, 0, 0, -0.3, -0.4, -0.5], "reward_score": 1.0, "num_turns": 4}`,
			"slime_generate.py":  `{"tokens": [1, 2, 3, 10, 11, 4, 5, 12, 13, 14], "response_length": 7, "loss_mask": [1, 1, 0, 0, 1, 1, 1], "rollout_log_probs": [-0.1, -0.2, 0, 0, -0.3, -0.4, -0.5], "reward": 1.0, "status": "completed"}`,
		}
		for name, w := range want {
			out, _ := run(t, ctx, s.env(), py, filepath.Join("examples", name), "fix-test")
			if strings.TrimSpace(out) != w {
				t.Errorf("%s printed\n%s\nwant\n%s", name, out, w)
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Errorf("%s output is not JSON: %v", name, err)
			}
		}
	})
}

// TestInstallOffline installs the package with pip, without an index,
// into a fresh venv and imports it from there.
func TestInstallOffline(t *testing.T) {
	py := python(t)
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(py, "-m", "venv", venv).CombinedOutput(); err != nil {
		t.Skipf("python3 -m venv does not work here (Debian: apt-get install python3-venv): %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1", "PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH=", "VENV="+venv)
	run(t, ctx, env, filepath.Join(venv, "bin", "pip"), "install", "--no-index", ".")
	out, _ := run(t, ctx, env, filepath.Join(venv, "bin", "python"), "-c",
		"import orchard, os; print(orchard.__version__, os.path.dirname(orchard.__file__).startswith(os.environ['VENV']))")
	if out != "0.1.0 True\n" {
		t.Errorf("import orchard from the venv printed %q, want the version and True (imported from the venv)", out)
	}
}
