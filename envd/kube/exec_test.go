package kube

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	utilexec "k8s.io/utils/exec"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/client"
)

func ptr[T any](v T) *T { return &v }

// TestExecArgv runs the pods/exec command line built for hostile requests
// with the local /bin/sh, as a container runtime would, and checks that
// request data never runs as shell code.
func TestExecArgv(t *testing.T) {
	wd := t.TempDir()
	if err := os.Mkdir(filepath.Join(wd, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	hostile := "$(touch pwned) `touch pwned` ; touch pwned \"'\n\\"
	tests := []struct {
		name     string
		req      envd.ExecRequest
		stdin    bool // give the process a stdin that never ends
		wantOut  string
		wantCode int
		started  bool
	}{
		{"argv", envd.ExecRequest{Cmd: []string{"printf", "%s|", hostile, "--", "$1", "-e"}},
			false, hostile + "|--|$1|-e|", 0, true},
		{"env", envd.ExecRequest{Env: map[string]string{"A": hostile, "B": "", "IFS": "0123456789"},
			Cmd: []string{"/bin/sh", "-c", `printf '%s|%s|%s' "$A" "$B" "${ORCHARD_AGENT_TOKEN-unset}"`}},
			false, hostile + "||unset", 0, true},
		{"shell", envd.ExecRequest{Shell: `printf %s "$((6*7))"; exit 3`}, false, "42", 3, true},
		{"relative cwd", envd.ExecRequest{Cmd: []string{"pwd"}, Cwd: "sub"}, false, wd + "/sub\n", 0, true},
		{"absolute cwd", envd.ExecRequest{Cmd: []string{"pwd"}, Cwd: wd + "/sub/.."}, false, wd + "\n", 0, true},
		{"stdin", envd.ExecRequest{Cmd: []string{"cat"}, Stdin: ptr(hostile)}, false, hostile, 0, true},
		{"no stdin means /dev/null", envd.ExecRequest{Cmd: []string{"cat"}}, true, "", 0, true},
		{"missing cwd", envd.ExecRequest{Cmd: []string{"pwd"}, Cwd: "nope"}, false, "", 127, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argv, err := execArgv(wd, &tt.req)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Dir = "/"
			cmd.Env = append(os.Environ(), tokenEnv+"=secret")
			if tt.req.Stdin != nil {
				cmd.Stdin = strings.NewReader(*tt.req.Stdin)
			}
			if tt.stdin {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				defer w.Close()
				cmd.Stdin = r
			}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err = cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != tt.wantCode {
				t.Fatalf("exit code = %d (%v, stderr %q), want %d", code, err, errb.String(), tt.wantCode)
			}
			pidLine, rest, ok := strings.Cut(out.String(), "\n")
			if !tt.started {
				if out.Len() != 0 {
					t.Errorf("stdout = %q, want nothing before the command starts", out.String())
				}
				return
			}
			if !ok || pidLine != strconv.Itoa(cmd.Process.Pid) {
				t.Errorf("first stdout line = %q, want the PID %d", pidLine, cmd.Process.Pid)
			}
			if rest != tt.wantOut {
				t.Errorf("stdout = %q, want %q", rest, tt.wantOut)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(wd, "pwned")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("request data ran as shell code: %v", err)
	}
	if _, err := os.Stat("/pwned"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("request data ran as shell code: %v", err)
	}
}

func TestExecArgvRejects(t *testing.T) {
	tests := []struct {
		name string
		req  envd.ExecRequest
	}{
		{"cmd and shell", envd.ExecRequest{Cmd: []string{"true"}, Shell: "true"}},
		{"no command", envd.ExecRequest{}},
		{"env name export rejects", envd.ExecRequest{Cmd: []string{"true"}, Env: map[string]string{"A-B": "1"}}},
		{"env name like an option", envd.ExecRequest{Cmd: []string{"true"}, Env: map[string]string{"-p": "1"}}},
		{"NUL", envd.ExecRequest{Cmd: []string{"true", "a\x00b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := execArgv("/work", &tt.req); !errors.Is(err, envd.ErrBadRequest) {
				t.Errorf("execArgv(%+v) = %v, want a bad request", tt.req, err)
			}
		})
	}
}

func TestResultOf(t *testing.T) {
	tests := []struct {
		name       string
		err, cause error
		want       envd.ExecResult
		wantKill   bool
	}{
		{"exit 0", nil, nil, envd.ExecResult{}, false},
		{"exit 3", utilexec.CodeExitError{Err: errors.New("command terminated with exit code 3"), Code: 3}, nil,
			envd.ExecResult{ExitCode: 3}, false},
		{"wrapped exit 2", fmt.Errorf("x: %w", utilexec.CodeExitError{Code: 2}), nil, envd.ExecResult{ExitCode: 2}, false},
		{"timeout", context.DeadlineExceeded, errTimedOut,
			envd.ExecResult{ExitCode: 137, TimedOut: true, Error: "timed out after 2s; process group killed"}, true},
		{"client left", context.Canceled, context.Canceled, envd.ExecResult{ExitCode: 137, Error: "killed: client went away"}, true},
		{"stream broke", errors.New("boom"), nil, envd.ExecResult{ExitCode: -1, Error: "exec through the API server: boom"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, kill := resultOf(tt.err, tt.cause, 2*time.Second)
			if !reflect.DeepEqual(got, tt.want) || kill != tt.wantKill {
				t.Errorf("resultOf(%v, %v) = %+v, %v; want %+v, %v", tt.err, tt.cause, got, kill, tt.want, tt.wantKill)
			}
		})
	}
}

// TestExecLog feeds an exec log the way remotecommand does (the PID line
// split across writes, wrapper stderr before it) and checks the events.
func TestExecLog(t *testing.T) {
	x := newExecLog("x-1", "cat")
	pw := &pidWriter{x: x}
	ew := outWriter{x, envd.EventStderr}
	for _, w := range []struct {
		w interface{ Write([]byte) (int, error) }
		p string
	}{{ew, "early\n"}, {pw, "12"}, {pw, "34\nout\xff"}, {ew, "late"}, {pw, "!"}} {
		if n, err := w.w.Write([]byte(w.p)); n != len(w.p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", w.p, n, err)
		}
	}
	x.finish(envd.ExecResult{ExitCode: 3})
	evs, _ := x.since(0)
	var got []string
	for _, ev := range evs {
		got = append(got, fmt.Sprintf("%d %s %d %q", ev.Seq, ev.Type, ev.PID, ev.Bytes()))
	}
	want := []string{`1 start 1234 ""`, `2 stderr 0 "early\n"`, `3 stdout 0 "out\xff"`, `4 stderr 0 "late"`, `5 stdout 0 "!"`, `6 end 0 ""`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	res := x.result()
	if res.ExitCode != 3 || string(res.StdoutBytes()) != "out\xff!" || res.Stderr != "early\nlate" || res.ExecID != "x-1" {
		t.Errorf("result = %+v", res)
	}

	never := newExecLog("x-2", "pwd")
	_, _ = outWriter{never, envd.EventStderr}.Write([]byte("sh: 1: cd: can't cd to /nope\n"))
	never.finish(envd.ExecResult{ExitCode: -1, Error: "exec through the API server: exit status 127"})
	if res := never.result(); res.ExitCode != 127 || res.Error != "start pwd: sh: 1: cd: can't cd to /nope" || res.Stderr != "" {
		t.Errorf("never started: result = %+v", res)
	}
}

// testEpisodes hands out one fixed episode env.
type testEpisodes struct{}

func (testEpisodes) Create(context.Context, envd.EpisodeSpec) (*envd.Episode, error) {
	return &envd.Episode{ID: "ep-1", Env: map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}}, nil
}

func (testEpisodes) Finish(context.Context, string, envd.Outcome) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}

// TestKubeExecFallback runs execs through envd on a sandbox whose agent
// never started: auto mode must run them through the real API server's
// pods/exec (which kwok answers by running the command locally), with the
// sandbox and episode env, the cwd, stdin and the timeout. A sandbox whose
// agent answers keeps using the agent until the agent dies.
func TestKubeExecFallback(t *testing.T) {
	cs := needStack(t)
	ns := newNamespace(t, cs)
	ctx := context.Background()
	port, _ := strconv.Atoi(freePort())
	k := startKubelet(t, cs, ns, port)
	b, err := New(Options{Pods: podsAs(t, ""), Namespace: ns, AgentImage: "ghcr.io/orchard-rl/orchard:test", AgentPort: port,
		ReadyTimeout: time.Minute, RESTConfig: restConfig(t, ""), AgentWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	m := envd.NewManager(envd.Options{Backend: b, BackendName: "kubernetes", Episodes: testEpisodes{}})
	ts := httptest.NewServer(envd.NewServer(envd.ServerOptions{Manager: m}))
	defer ts.Close()
	c := client.New(client.Options{BaseURL: ts.URL})
	wd := t.TempDir()
	sb, err := c.Create(ctx, envd.Spec{Image: "busybox", Workdir: wd, Env: map[string]string{"SPEC": "from spec", "OVER": "spec"},
		Episode: &envd.EpisodeSpec{TaskID: "t1"}, Labels: map[string]string{labelNoAgent: "off"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()

	tests := []struct {
		name      string
		req       envd.ExecRequest
		wantOut   string
		wantErr   string
		wantCode  int
		errSubstr string
	}{
		{name: "bytes and env", req: envd.ExecRequest{Env: map[string]string{"OVER": "exec"}, Cmd: []string{"/bin/sh", "-c",
			`printf 'out\377\000%s|%s|%s|%s' "$SPEC" "$OPENAI_BASE_URL" "$OVER" "${ORCHARD_AGENT_TOKEN-unset}"; printf 'err\n' >&2`}},
			wantOut: "out\xff\x00from spec|http://127.0.0.1:9/v1|exec|unset", wantErr: "err\n"},
		{name: "argv is not shell code", req: envd.ExecRequest{Cmd: []string{"printf", "%s|", "$(touch pwned)", "`touch pwned`", "a b", `'"`, ";exit 9"}},
			wantOut: "$(touch pwned)|`touch pwned`|a b|'\"|;exit 9|"},
		{name: "mkdir", req: envd.ExecRequest{Cmd: []string{"mkdir", "sub"}}},
		{name: "cwd", req: envd.ExecRequest{Cmd: []string{"pwd"}, Cwd: "sub"}, wantOut: wd + "/sub\n"},
		// kwok never closes an exec's stdin, so this reads a known length.
		{name: "stdin", req: envd.ExecRequest{Cmd: []string{"head", "-c", "5"}, Stdin: ptr("hello world")}, wantOut: "hello"},
		{name: "no stdin", req: envd.ExecRequest{Cmd: []string{"cat"}}},
		{name: "shell", req: envd.ExecRequest{Shell: "echo $((6*7))"}, wantOut: "42\n"},
		// kwok v0.8.0 loses exit codes (see deploy/testenv/kwok-exec.yaml):
		// the API server reports "exit status 3" as an error, so envd
		// reports -1 with it. A real kubelet sends the code, which
		// TestResultOf maps.
		{name: "non-zero exit", req: envd.ExecRequest{Shell: "echo partial; exit 3"}, wantOut: "partial\n", wantCode: -1,
			errSubstr: "exit status 3"},
		{name: "missing cwd", req: envd.ExecRequest{Cmd: []string{"pwd"}, Cwd: "nope"}, wantCode: 127,
			errSubstr: "start pwd: "},
		{name: "timeout", req: envd.ExecRequest{Cmd: []string{"sleep", "60"}, Timeout: envd.Duration(500 * time.Millisecond)},
			wantCode: 137, errSubstr: "timed out after 500ms"},
	}
	for _, tt := range tests {
		res, err := sb.Exec(ctx, tt.req)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if res.ExitCode != tt.wantCode || string(res.StdoutBytes()) != tt.wantOut || string(res.StderrBytes()) != tt.wantErr ||
			!strings.Contains(res.Error, tt.errSubstr) || (tt.errSubstr == "") != (res.Error == "") {
			t.Errorf("%s: exec = code %d, stdout %q, stderr %q, error %q; want %d, %q, %q, %q",
				tt.name, res.ExitCode, res.StdoutBytes(), res.StderrBytes(), res.Error, tt.wantCode, tt.wantOut, tt.wantErr, tt.errSubstr)
		}
	}
	if _, err := os.Stat(filepath.Join(wd, "pwned")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("request data ran as shell code: %v", err)
	}
	checkStream(t, sb)

	up, err := c.Create(ctx, envd.Spec{Image: "busybox", Workdir: wd})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	// The test kubelet's agents serve from their own temp dir, so pwd
	// tells which path an exec took.
	start := time.Now()
	if res, err := up.Exec(ctx, envd.ExecRequest{Cmd: []string{"pwd"}}); err != nil || !strings.HasPrefix(res.Stdout, filepath.Join(os.TempDir(), "orchard-pod-")) {
		t.Fatalf("exec with the agent up = %+v, %v; want it run by the agent", res, err)
	}
	t.Logf("exec through the agent took %s", time.Since(start))
	k.kill("orchard-" + up.ID())
	// The pool may still hold the dead agent's connection; a request on
	// it fails after it may have been sent, which must not be retried.
	b.opts.Transport.(*http.Transport).CloseIdleConnections()
	for i := range 2 { // the first finds the agent gone, the second skips it
		start := time.Now()
		if res, err := up.Exec(ctx, envd.ExecRequest{Cmd: []string{"pwd"}}); err != nil || res.Stdout != wd+"\n" || res.ExitCode != 0 {
			t.Fatalf("exec %d after the agent died = %+v, %v; want it run through the API server", i, res, err)
		}
		t.Logf("exec %d through the API server took %s", i, time.Since(start))
	}
}

// checkStream runs a streamed exec through the API server: the start
// event with the command's PID comes first, the end event last.
func checkStream(t *testing.T, sb *client.Sandbox) {
	t.Helper()
	st, err := sb.ExecStream(context.Background(), envd.ExecRequest{Shell: "printf a; printf b >&2; printf c"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	first, err := st.Next()
	if err != nil || first.Type != envd.EventStart || first.PID <= 0 || first.Seq != 1 || first.ExecID != st.ExecID() {
		t.Fatalf("first event = %+v, %v; want start with a PID", first, err)
	}
	res, err := st.Wait()
	if err != nil || res.ExitCode != 0 || res.Stdout != "ac" || res.Stderr != "b" || res.ExecID != st.ExecID() {
		t.Fatalf("stream result = %+v, %v", res, err)
	}
}

// TestKubeExecKill kills a local process group through the API server's
// pods/exec, as envd does on a timeout (kwok runs the kill locally).
func TestKubeExecKill(t *testing.T) {
	cs := needStack(t)
	ns := newNamespace(t, cs)
	b := newTestBackend(t, podsAs(t, ""), ns, func(o *Options) { o.RESTConfig = restConfig(t, "") })
	ctx := context.Background()
	spec := envd.Spec{Image: "busybox", Workdir: t.TempDir()}
	if _, err := b.Create(ctx, "sb-kill", &spec); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(line))
	if err := b.killExec(ctx, "orchard-sb-kill", cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "signal: killed") {
		t.Fatalf("group leader: Wait = %v, want killed", err)
	}
	// The background child was reparented; nothing reports its end, so
	// poll its state (bounded).
	for deadline := time.Now().Add(5 * time.Second); ; {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d of the group still runs: %s", child, stat)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
