package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/utils/exec"

	"github.com/orchard-rl/orchard/envd"
)

// wrapper is the POSIX sh script that pods/exec runs to give a command
// what the agent would: $1 is the cwd, $2 is 1 when stdin is given (else
// stdin is /dev/null), then NAME=VALUE words up to "--", then the argv.
// It prints its PID (which exec keeps) as the first stdout line, so envd
// knows the command started and can kill it. Request data only ever
// arrives as positional parameters, never as shell code.
const wrapper = `unset ` + tokenEnv + `
cd -- "$1" || exit 127
[ "$2" = 1 ] || exec </dev/null
shift 2
while [ "$1" != -- ]; do export "$1" || exit 127; shift; done
shift
echo "$$"
exec "$@"`

// killScript kills the process group led by $1, or $1 alone when it leads
// none (a runtime that does not start execs in their own group).
const killScript = `kill -9 "-$1" 2>/dev/null || kill -9 "$1"`

// defaultExecTimeout is the agent's default, for execs that give none.
const defaultExecTimeout = 10 * time.Minute

// envName is what `export` accepts as a variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// errTimedOut is the cause of an exec's context when its timeout passed.
var errTimedOut = errors.New("exec timed out")

// execArgv builds the pods/exec command that runs req in a sandbox whose
// work directory is workdir.
func execArgv(workdir string, req *envd.ExecRequest) ([]string, error) {
	cmd := req.Cmd
	switch {
	case len(req.Cmd) > 0 && req.Shell != "":
		return nil, envd.Errorf(envd.ErrBadRequest, "give either cmd or shell, not both")
	case req.Shell != "":
		cmd = []string{"/bin/sh", "-c", req.Shell}
	case len(req.Cmd) == 0 || req.Cmd[0] == "":
		return nil, envd.Errorf(envd.ErrBadRequest, `missing command: set "cmd" (an argv array) or "shell" (a string)`)
	}
	cwd := workdir
	if req.Cwd != "" {
		cwd = path.Join(workdir, req.Cwd)
		if path.IsAbs(req.Cwd) {
			cwd = path.Clean(req.Cwd)
		}
	}
	hasStdin := "0"
	if req.Stdin != nil {
		hasStdin = "1"
	}
	argv := []string{"/bin/sh", "-c", wrapper, "orchard-exec", cwd, hasStdin}
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		if !envName.MatchString(k) {
			return nil, envd.Errorf(envd.ErrBadRequest, "env name %q: exec through the API server takes only shell variable names", k)
		}
		argv = append(argv, k+"="+req.Env[k])
	}
	argv = append(append(argv, "--"), cmd...)
	for _, a := range argv {
		if strings.ContainsRune(a, 0) {
			return nil, envd.Errorf(envd.ErrBadRequest, "command, cwd and env must not contain NUL bytes")
		}
	}
	return argv, nil
}

// podExec runs argv in pod's sandbox container through the API server's
// pods/exec, over WebSocket, or SPDY when the server cannot upgrade to
// WebSocket (as kubectl does). A nil stdin means none. It returns nil on
// exit 0 and an [exec.CodeExitError] for other exit codes.
func (b *Backend) podExec(ctx context.Context, pod string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	u := execURL(b.core, b.opts.Namespace, pod,
		&corev1.PodExecOptions{Container: container, Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true})
	ws, err := remotecommand.NewWebSocketExecutor(b.opts.RESTConfig, http.MethodGet, u.String())
	if err != nil {
		return fmt.Errorf("pods/exec over websocket: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.opts.RESTConfig, http.MethodPost, u)
	if err != nil {
		return fmt.Errorf("pods/exec over spdy: %w", err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("pods/exec: %w", err)
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// killExec kills, through the API server, the process group pid leads in
// pod (or pid alone). It gives up after 10 s.
func (b *Backend) killExec(ctx context.Context, pod string, pid int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer // written concurrently
	err := b.podExec(ctx, pod, []string{"/bin/sh", "-c", killScript, "orchard-kill", strconv.Itoa(pid)}, nil, &stdout, &stderr)
	if err != nil {
		return fmt.Errorf("kill pid %d in pod %s: %w (%s)", pid, pod, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// runExec runs argv (built from req) in the transport's pod through the
// API server and records its events in x. When the timeout passes or ctx
// ends first, it kills the command's process group.
func (t *podTransport) runExec(ctx context.Context, req *envd.ExecRequest, argv []string, x *execLog) {
	timeout := req.Timeout.D()
	if timeout <= 0 {
		timeout = defaultExecTimeout
	}
	tctx, cancel := context.WithTimeoutCause(ctx, timeout, errTimedOut)
	defer cancel()
	var stdin io.Reader
	if req.Stdin != nil {
		stdin = strings.NewReader(*req.Stdin)
	}
	err := t.b.podExec(tctx, t.pod, argv, stdin, &pidWriter{x: x}, outWriter{x, envd.EventStderr})
	res, kill := resultOf(err, context.Cause(tctx), timeout)
	if pid := x.pid(); kill && pid > 0 {
		if err := t.b.killExec(context.WithoutCancel(ctx), t.pod, pid); err != nil {
			t.b.opts.Logger.Warn("kill exec through the API server", "pod", t.pod, "err", err)
		}
	}
	x.finish(res)
}

// resultOf maps how a pods/exec stream ended (err, and cause when its
// context ended) to the agent's result fields, and reports whether the
// command must be killed: the command's exit code; 137 when envd stopped
// it (timeout, or the client left); -1 when the stream failed.
func resultOf(err, cause error, timeout time.Duration) (envd.ExecResult, bool) {
	var code exec.CodeExitError
	switch {
	case err == nil:
		return envd.ExecResult{}, false
	case errors.As(err, &code):
		return envd.ExecResult{ExitCode: code.Code}, false
	case errors.Is(cause, errTimedOut):
		return envd.ExecResult{ExitCode: 137, TimedOut: true,
			Error: fmt.Sprintf("timed out after %s; process group killed", timeout)}, true
	case cause != nil:
		return envd.ExecResult{ExitCode: 137, Error: "killed: client went away"}, true
	}
	return envd.ExecResult{ExitCode: -1, Error: "exec through the API server: " + err.Error()}, false
}

// pidWriter takes the wrapper's first stdout line (its PID) and passes
// the rest of stdout on. remotecommand calls it from one goroutine.
type pidWriter struct {
	x    *execLog
	line []byte
	seen bool
}

func (w *pidWriter) Write(p []byte) (int, error) {
	n := len(p)
	if !w.seen {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.line = append(w.line, p...)
			return n, nil
		}
		w.line, p = append(w.line, p[:i]...), p[i+1:]
		pid, err := strconv.Atoi(string(w.line))
		if err != nil {
			return 0, fmt.Errorf("exec wrapper printed %q, not its PID", w.line)
		}
		w.seen = true
		w.x.start(pid)
	}
	if len(p) > 0 {
		w.x.output(envd.EventStdout, p)
	}
	return n, nil
}

// outWriter feeds one output stream into an exec's log.
type outWriter struct {
	x   *execLog
	typ string
}

func (w outWriter) Write(p []byte) (int, error) {
	w.x.output(w.typ, p)
	return len(p), nil
}
