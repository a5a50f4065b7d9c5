//go:build linux

package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// patience bounds every wait on another process in these tests.
const patience = 20 * time.Second

// agentSpec says how to start an agent process.
type agentSpec struct {
	newPID bool     // as PID 1 of a new PID namespace
	args   []string // flags after "--listen-fd 3 --workdir DIR"
	env    []string // extra environment
	mode   string   // agentModeEnv value; default "1"
}

// agentProc is an agent process started by a test: the test binary in
// agent mode (see testmain_test.go), serving on a TCP socket handed in as
// fd 3, so that requests queue in the socket's backlog until it serves.
type agentProc struct {
	cmd      *exec.Cmd
	pid      int // the process started: the init when there is one
	agentPID int // the process serving (set by ready)
	url      string
	client   *http.Client
	dir      string        // its work directory
	stdout   *bufio.Reader // its stdout
	waited   bool
}

func startAgent(t *testing.T, spec agentSpec) *agentProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lnf, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer lnf.Close()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outW.Close()
	logf, err := os.Create(filepath.Join(t.TempDir(), "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if spec.mode == "" {
		spec.mode = "1"
	}
	a := &agentProc{url: "http://" + ln.Addr().String(), client: &http.Client{Transport: &http.Transport{}}, dir: t.TempDir(), stdout: bufio.NewReader(outR)}
	a.cmd = exec.Command(self, append([]string{"--listen-fd", "3", "--workdir", a.dir}, spec.args...)...)
	// The first of duplicate variables wins, so spec's come first.
	a.cmd.Env = slices.Concat([]string{agentModeEnv + "=" + spec.mode}, spec.env, os.Environ())
	if os.Getenv("GORACE") == "" {
		// A -race binary sleeps a second on exit by default.
		a.cmd.Env = append(a.cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	a.cmd.Stdin, a.cmd.Stdout, a.cmd.Stderr = inR, outW, logf
	a.cmd.ExtraFiles = []*os.File{lnf}
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if spec.newPID {
		a.cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID
	}
	if err := a.cmd.Start(); err != nil {
		inW.Close()
		outR.Close()
		logf.Close()
		if spec.newPID && errors.Is(err, syscall.EPERM) {
			t.Skipf("cannot create a PID namespace here: %v", err)
		}
		t.Fatal(err)
	}
	a.pid = a.cmd.Process.Pid
	t.Cleanup(func() {
		if !a.waited {
			killTree(a.pid)
			_ = a.cmd.Wait()
		}
		a.client.CloseIdleConnections()
		inW.Close()
		outR.Close()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("agent log:\n%s", b)
		}
	})
	return a
}

// ready waits until the agent serves and finds the serving process: the
// init's only child when there is an init, else the process started.
func (a *agentProc) ready(t *testing.T, underInit bool) {
	t.Helper()
	res, err := a.client.Get(a.url + "/agent/v1/health")
	if err != nil {
		t.Fatalf("agent health: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("agent health = %d, want 200", res.StatusCode)
	}
	a.agentPID = a.pid
	if underInit {
		a.agentPID = a.onlyChild(t)
	}
}

// onlyChild returns the init's one child, failing when there are others.
func (a *agentProc) onlyChild(t *testing.T) int {
	t.Helper()
	kids := childrenOf(a.pid)
	if len(kids) != 1 {
		t.Fatalf("children of the init = %v, want just the agent", kids)
	}
	return slices.Collect(maps.Keys(kids))[0]
}

// tryExec runs shell through the agent's API and returns its result; it is
// safe to call from any goroutine.
func (a *agentProc) tryExec(shell string) (envd.ExecResult, error) {
	body, _ := json.Marshal(envd.ExecRequest{Shell: shell})
	res, err := a.client.Post(a.url+"/agent/v1/exec", "application/json", bytes.NewReader(body))
	if err != nil {
		return envd.ExecResult{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return envd.ExecResult{}, err
	}
	if res.StatusCode != 200 {
		return envd.ExecResult{}, fmt.Errorf("exec %q = %d %s", shell, res.StatusCode, b)
	}
	var r envd.ExecResult
	return r, json.Unmarshal(b, &r)
}

func (a *agentProc) exec(t *testing.T, shell string) envd.ExecResult {
	t.Helper()
	r, err := a.tryExec(shell)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// startStream starts shell as a streaming exec, reads its start event and
// drops the connection (the command keeps running); it returns the pid.
func (a *agentProc) startStream(t *testing.T, shell string) int {
	t.Helper()
	body, _ := json.Marshal(envd.ExecRequest{Shell: shell, Stream: true})
	res, err := a.client.Post(a.url+"/agent/v1/exec", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev envd.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Type != envd.EventStart {
				t.Fatalf("first event = %s (%v), want start", data, err)
			}
			return ev.PID
		}
	}
	t.Fatalf("stream ended without a start event: %v", sc.Err())
	return 0
}

// wait waits (bounded) for the process started to exit and returns its
// exit status, 128+signal when a signal killed it.
func (a *agentProc) wait(t *testing.T) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- a.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(patience):
		killTree(a.pid)
		<-done
		a.waited = true
		t.Fatalf("agent process did not exit within %s", patience)
	}
	a.waited = true
	if err != nil && !errors.As(err, new(*exec.ExitError)) {
		t.Fatal(err)
	}
	return exitCode(a.cmd.ProcessState)
}

// procInfo is a process's parent and state letter, from /proc.
type procInfo struct {
	ppid  int
	state byte
}

// procs reads every process visible in /proc, zombies included.
func procs() map[int]procInfo {
	ents, _ := os.ReadDir("/proc")
	m := map[int]procInfo{}
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if ppid, state, ok := statOf(pid); ok {
				m[pid] = procInfo{ppid, state}
			}
		}
	}
	return m
}

// childrenOf returns the children of pid with their state letters.
func childrenOf(pid int) map[int]byte {
	kids := map[int]byte{}
	for p, pi := range procs() {
		if pi.ppid == pid {
			kids[p] = pi.state
		}
	}
	return kids
}

// subtree returns every descendant of root, zombies included, with its
// state letter: for the init of a PID namespace, every other process in it.
func subtree(root int) map[int]byte {
	all := procs()
	kids := map[int][]int{}
	for p, pi := range all {
		kids[pi.ppid] = append(kids[pi.ppid], p)
	}
	tree := map[int]byte{}
	queue := slices.Clone(kids[root])
	for len(queue) > 0 {
		p := queue[0]
		queue = append(queue[1:], kids[p]...)
		tree[p] = all[p].state
	}
	return tree
}

// eventually polls cond until it holds, failing after patience; what
// describes the condition and last says what was seen instead.
func eventually(t *testing.T, what string, cond func() (ok bool, last string)) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last seen: %s", what, patience, last)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// onlyAgentLeft is the condition that the init's subtree is the agent
// alone, running: nothing else lives and no zombie is left.
func (a *agentProc) onlyAgentLeft() (bool, string) {
	tree := subtree(a.pid)
	st, ok := tree[a.agentPID]
	return len(tree) == 1 && ok && st != 'Z', fmt.Sprintf("subtree of init %d = %s", a.pid, states(tree))
}

// states formats a pid-to-state map in pid order.
func states(m map[int]byte) string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%d:%c ", p, m[p])
	}
	return "[" + strings.TrimSpace(b.String()) + "]"
}
