package local

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/client"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envd.Options{})
	ctx := context.Background()
	sb := e.create(t, envd.Spec{Env: map[string]string{"GREETING": "hi"}})
	if got := run(t, sb, `echo "$GREETING from $(pwd)"`); got.Stdout != "hi from /work\n" || got.ExitCode != 0 {
		t.Errorf("exec = %+v, want stdout %q", got, "hi from /work\n")
	}
	res, err := sb.Exec(ctx, envd.ExecRequest{Cmd: []string{"tr", "a-z", "A-Z"}, Stdin: ptr("abc")})
	if err != nil || res.Stdout != "ABC" {
		t.Errorf("exec with stdin = %+v, %v, want ABC", res, err)
	}
	if err := sb.WriteFile(ctx, "dir/f.bin", []byte{0, 1, 2, 255}, 0o640); err != nil {
		t.Fatal(err)
	}
	if got := run(t, sb, "stat -c %a dir/f.bin && od -An -tx1 dir/f.bin"); got.Stdout != "640\n 00 01 02 ff\n" {
		t.Errorf("file in sandbox = %q", got.Stdout)
	}
	if b, err := sb.ReadFile(ctx, "/work/dir/f.bin"); err != nil || !bytes.Equal(b, []byte{0, 1, 2, 255}) {
		t.Errorf("ReadFile = %v, %v", b, err)
	}
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	_ = tw.WriteHeader(&tar.Header{Name: "task/run.sh", Mode: 0o755, Size: 14, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("echo from tar\n"))
	_ = tw.Close()
	if err := sb.PutTar(ctx, "/work/in", tb.Bytes()); err != nil {
		t.Fatal(err)
	}
	if got := run(t, sb, "./in/task/run.sh"); got.Stdout != "from tar\n" {
		t.Errorf("uploaded script = %+v", got)
	}
	rc, err := sb.GetTar(ctx, "/work/in")
	if err != nil {
		t.Fatal(err)
	}
	names := tarNames(t, rc)
	if names != "task/ task/run.sh" {
		t.Errorf("tar names = %q, want %q", names, "task/ task/run.sh")
	}
	st, err := sb.ExecStream(ctx, envd.ExecRequest{Shell: "echo a; echo b >&2; exit 4"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sres, err := st.Wait()
	if err != nil || sres.ExitCode != 4 || sres.Stdout != "a\n" || sres.Stderr != "b\n" {
		t.Errorf("stream = %+v, %v", sres, err)
	}
	boxDir := filepath.Join(e.b.opts.StateDir, "s", sb.ID())
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(boxDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after delete, sandbox dir stat = %v, want not exist", err)
	}
	if _, err := sb.Exec(ctx, envd.ExecRequest{Shell: "true"}); !isStatus(err, 404) {
		t.Errorf("exec after delete = %v, want 404", err)
	}
}

func tarNames(t *testing.T, rc io.ReadCloser) string {
	t.Helper()
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return strings.Join(names, " ")
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

func ptr[T any](v T) *T { return &v }

func isStatus(err error, status int) bool {
	var e *envd.Error
	return errors.As(err, &e) && e.Status == status
}

// TestIsolation checks the acceptance list: a sandbox cannot read another's
// work dir, cannot write the host root, sees no host processes, has no
// capabilities, and with network "none" cannot reach a host listener.
func TestIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envd.Options{})
	a := e.create(t, envd.Spec{Network: envd.NetworkHost})
	b := e.create(t, envd.Spec{Network: "none"})
	run(t, a, "echo secret > s.txt")
	aWork := filepath.Join(e.b.opts.StateDir, "s", a.ID(), "work")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	tests := []struct {
		name, shell, want string
		sb                *client.Sandbox
	}{
		{"other work dir", "cat " + aWork + "/s.txt 2>/dev/null || echo denied", "denied\n", b},
		{"state dir hidden", "ls -A " + e.b.opts.StateDir + " | wc -l", "0\n", a},
		{"write etc", "touch /etc/x 2>/dev/null || echo denied", "denied\n", a},
		{"write usr", "touch /usr/x 2>/dev/null || echo denied", "denied\n", a},
		{"write root", "touch /x 2>/dev/null || echo denied", "denied\n", a},
		{"remount", "mount -o remount,rw / 2>/dev/null || echo denied", "denied\n", a},
		{"host processes", "cat /proc/[0-9]*/cmdline | tr '\\0' ' ' | grep -c -- '-test\\.' || true", "0\n", a},
		{"process count", "set -- /proc/[0-9]*; echo $#", "3\n", a}, // bwrap's init, the agent, this sh
		{"capabilities", "grep CapEff /proc/self/status", "CapEff:\t0000000000000000\n", a},
		{"tmp is private", "ls -A /tmp | wc -l", "0\n", a},
		{"net none", fmt.Sprintf("bash -c 'echo > /dev/tcp/127.0.0.1/%d' 2>/dev/null && echo open || echo blocked", port), "blocked\n", b},
		{"net host", fmt.Sprintf("bash -c 'echo > /dev/tcp/127.0.0.1/%d' 2>/dev/null && echo open || echo blocked", port), "open\n", a},
		{"hostname", "hostname", "sandbox\n", a},
	}
	go acceptAll(ln)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(t, tt.sb, tt.shell); got.Stdout != tt.want {
				t.Errorf("%s: stdout = %q (stderr %q), want %q", tt.shell, got.Stdout, got.Stderr, tt.want)
			}
		})
	}
}

func acceptAll(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// TestTimeoutKillsGrandchildren runs a command whose child, grandchild and
// setsid'd grandchild would outlive it; the timeout kills all of them.
func TestTimeoutKillsGrandchildren(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envd.Options{})
	sb := e.create(t, envd.Spec{})
	script := `sleep 300 & echo $! > c.pid; setsid sleep 300 & echo $! > s.pid; ` +
		`sh -c 'sleep 300 & echo $! > g.pid; wait' & while [ ! -s g.pid ]; do sleep 0.01; done; echo ready; wait`
	res, err := sb.Exec(context.Background(), envd.ExecRequest{Shell: script, Timeout: envd.Duration(2e9)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 137 || res.Stdout != "ready\n" {
		t.Fatalf("exec = %+v, want timed out with exit 137", res)
	}
	// A killed process is a zombie until the jail's init reaps it, and
	// kill -0 succeeds on zombies: read the state from /proc instead.
	got := run(t, sb, `for f in c s g; do st=$(cut -d' ' -f3 /proc/$(cat $f.pid)/stat 2>/dev/null); `+
		`{ [ -z "$st" ] || [ "$st" = Z ]; } && echo "$f dead" || echo "$f alive"; done`)
	if got.Stdout != "c dead\ns dead\ng dead\n" {
		t.Errorf("after timeout: %q", got.Stdout)
	}
}

// TestConcurrent200 keeps 200 sandboxes alive at once, runs a short
// command in each concurrently, then deletes them all.
func TestConcurrent200(t *testing.T) {
	if testing.Short() {
		t.Skip("200 jails; skipped with -short")
	}
	e := newEnv(t, envd.Options{})
	ctx := context.Background()
	const n = 200
	sbs := make([]*client.Sandbox, n)
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			sb, err := e.c.Create(ctx, envd.Spec{})
			sbs[i] = sb
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := len(e.m.List()); got != n {
		t.Fatalf("live sandboxes = %d, want %d", got, n)
	}
	var g2 errgroup.Group
	for i, sb := range sbs {
		g2.Go(func() error {
			res, err := sb.Exec(ctx, envd.ExecRequest{Shell: "echo " + strconv.Itoa(i)})
			if err != nil {
				return err
			}
			if res.Stdout != strconv.Itoa(i)+"\n" {
				return fmt.Errorf("sandbox %d: stdout %q", i, res.Stdout)
			}
			return nil
		})
	}
	if err := g2.Wait(); err != nil {
		t.Fatal(err)
	}
	var g3 errgroup.Group
	g3.SetLimit(16)
	for _, sb := range sbs {
		g3.Go(sb.Close)
	}
	if err := g3.Wait(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(e.b.opts.StateDir, "s"))
	if len(ents) != 0 || len(e.m.List()) != 0 {
		t.Errorf("after delete: %d state dirs, %d live sandboxes; want 0, 0", len(ents), len(e.m.List()))
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envd.Options{})
	tests := []struct {
		name, method, path, body, wantMsg string
		wantStatus                        int
	}{
		{"bad memory", "POST", "/envd/v1/sandboxes", `{"resources":{"memory":"lots"}}`, "resources.memory", 400},
		{"bad cpu", "POST", "/envd/v1/sandboxes", `{"resources":{"cpu":"-1"}}`, "resources.cpu", 400},
		{"relative image", "POST", "/envd/v1/sandboxes", `{"image":"ubuntu:24.04"}`, "root filesystem directory", 400},
		{"relative workdir", "POST", "/envd/v1/sandboxes", `{"workdir":"work"}`, "absolute path", 400},
		{"bad network", "POST", "/envd/v1/sandboxes", `{"network":"bridge"}`, "network", 400},
		{"unknown field", "POST", "/envd/v1/sandboxes", `{"imgae":"x"}`, "unknown field", 400},
		{"empty body", "POST", "/envd/v1/sandboxes", ``, "empty body", 400},
		{"episode without proxy", "POST", "/envd/v1/sandboxes", `{"episode":{"task_id":"t"}}`, "--proxy", 400},
		{"unknown sandbox", "POST", "/envd/v1/sandboxes/sb-nope/exec", `{"cmd":["true"]}`, "no sandbox", 404},
		{"unknown route", "GET", "/envd/v2/x", ``, "no route", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, e.url+tt.path, strings.NewReader(tt.body))
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var body struct {
				Error envd.Error `json:"error"`
			}
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tt.wantStatus || !strings.Contains(body.Error.Message, tt.wantMsg) {
				t.Errorf("%s %s %s = %d %q, want %d containing %q", tt.method, tt.path, tt.body, res.StatusCode, body.Error.Message, tt.wantStatus, tt.wantMsg)
			}
		})
	}
	if n := len(e.m.List()); n != 0 {
		t.Errorf("live sandboxes after bad input = %d, want 0", n)
	}
}
