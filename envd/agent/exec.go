package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// execution is one command started by the agent and the log of its
// events, kept after it ends so that clients can reattach.
type execution struct {
	id      string
	started time.Time
	doneCh  chan struct{} // closed by finish

	mu        sync.Mutex // guards following, and the log's contents
	log       *envd.ExecLog
	kill      func(reason string)
	killCause string
}

func newExecution(id string, maxBytes int64) *execution {
	return &execution{id: id, started: time.Now(), doneCh: make(chan struct{}), log: envd.NewExecLog(id, maxBytes)}
}

// output stores one chunk of stdout or stderr, up to the output cap.
func (x *execution) output(typ string, p []byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.log.Output(typ, p)
}

// since returns the stored events after seq, whether the exec has ended,
// and a channel closed on the next append.
func (x *execution) since(seq int64) ([]envd.Event, bool, <-chan struct{}) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.log.Since(seq)
}

// finish records the result, appends the end event and wakes readers.
func (x *execution) finish(res envd.ExecResult) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.log.Finish(res)
	close(x.doneCh)
}

// fullResult returns the result with stdout and stderr joined from the
// events; ok is false while the exec is running.
func (x *execution) fullResult() (envd.ExecResult, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.log.Result()
}

// stop kills the exec's process tree once, recording why.
func (x *execution) stop(reason string) {
	x.mu.Lock()
	kill := x.kill
	if x.killCause == "" {
		x.killCause = reason
	}
	x.mu.Unlock()
	if kill != nil {
		kill(reason)
	}
}

// outWriter feeds one output stream of a command into its execution.
type outWriter struct {
	x   *execution
	typ string
}

func (w outWriter) Write(p []byte) (int, error) {
	w.x.output(w.typ, p)
	return len(p), nil
}

// argv turns a request into the argument vector it runs.
func argv(req *envd.ExecRequest) ([]string, error) {
	switch {
	case len(req.Cmd) > 0 && req.Shell != "":
		return nil, envd.Errorf(envd.ErrBadRequest, "give either cmd or shell, not both")
	case req.Shell != "":
		return []string{"/bin/sh", "-c", req.Shell}, nil
	case len(req.Cmd) == 0 || req.Cmd[0] == "":
		return nil, envd.Errorf(envd.ErrBadRequest, `missing command: set "cmd" (an argv array) or "shell" (a string)`)
	}
	return req.Cmd, nil
}

// mergeEnv overlays extra onto base (KEY=VALUE lists), sorted by key.
func mergeEnv(base []string, extra map[string]string) []string {
	m := make(map[string]string, len(base)+len(extra))
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// start launches req in its own process group and returns its execution;
// a goroutine owned by the server waits for it and applies the timeout.
func (s *Server) start(req *envd.ExecRequest) (*execution, error) {
	args, err := argv(req)
	if err != nil {
		return nil, err
	}
	for k := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, envd.Errorf(envd.ErrBadRequest, "invalid env name %q", k)
		}
	}
	timeout := req.Timeout.D()
	if timeout <= 0 {
		timeout = s.opts.DefaultTimeout
	}
	x := newExecution(s.newID(), s.opts.MaxOutput)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = s.path(req.Cwd)
	cmd.Env = mergeEnv(s.opts.BaseEnv, req.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if req.Stdin != nil {
		cmd.Stdin = strings.NewReader(*req.Stdin)
	}
	cmd.Stdout = outWriter{x, envd.EventStdout}
	cmd.Stderr = outWriter{x, envd.EventStderr}
	cmd.WaitDelay = s.opts.WaitDelay
	// Hold the lock across Start: the output copiers start with the process
	// and their writes wait here, so the start event is always first.
	x.mu.Lock()
	if err := cmd.Start(); err != nil {
		x.log.Append(envd.Event{Type: envd.EventStart})
		x.mu.Unlock()
		x.finish(envd.ExecResult{ExitCode: 127, Error: fmt.Sprintf("start %s: %v", args[0], err)})
		s.register(x)
		return x, nil
	}
	pid := cmd.Process.Pid
	x.kill = func(string) { killTree(pid) }
	x.log.Append(envd.Event{Type: envd.EventStart, PID: pid})
	x.mu.Unlock()
	s.register(x)
	s.wg.Add(1)
	go s.waitExec(x, cmd, timeout)
	return x, nil
}

// waitExec waits for cmd, killing its process tree when the timeout
// passes or the server shuts down, and records the result.
func (s *Server) waitExec(x *execution, cmd *exec.Cmd, timeout time.Duration) {
	defer s.wg.Done()
	timer := time.AfterFunc(timeout, func() { x.stop("timeout") })
	stopOnClose := context.AfterFunc(s.ctx, func() { x.stop("agent shutting down") })
	err := cmd.Wait()
	timer.Stop()
	stopOnClose()
	res := envd.ExecResult{DurationMS: float64(time.Since(x.started).Microseconds()) / 1000}
	res.ExitCode = exitCode(cmd.ProcessState)
	x.mu.Lock()
	cause := x.killCause
	x.mu.Unlock()
	switch {
	case cause == "timeout":
		res.TimedOut = true
		res.Error = fmt.Sprintf("timed out after %s; process group killed", timeout)
	case cause != "":
		res.Error = "killed: " + cause
	case err != nil && !errors.As(err, new(*exec.ExitError)) && !errors.Is(err, exec.ErrWaitDelay):
		res.Error = err.Error()
	}
	x.finish(res)
	s.retire(x)
}

// exitCode returns the exit status, or 128+signal for a killed process.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		return waitCode(ws)
	}
	return ps.ExitCode()
}

// waitCode returns the exit status in ws, or 128+signal for a killed
// process, as a shell reports it.
func waitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// path resolves p against the work directory; "" is the work directory.
func (s *Server) path(p string) string {
	if p == "" {
		return s.opts.Workdir
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(s.opts.Workdir, p)
}
