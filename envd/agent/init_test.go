//go:build linux

package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func TestShouldInit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		args   []string
		marker string // value of initChildEnv; "" means unset
		want   bool
	}{
		{"not pid 1, no flag", nil, "", false},
		{"--init", []string{"--init"}, "", true},
		{"the agent an init started", []string{"--init"}, "1", false},
		{"other marker value", []string{"--init"}, "0", true},
		{"--install never inits", []string{"--init", "--install", "/x"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := ParseArgs(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			lookup := func(k string) (string, bool) {
				if k == initChildEnv && tt.marker != "" {
					return tt.marker, true
				}
				return "", false
			}
			if got := ShouldInit(c, lookup); got != tt.want {
				t.Errorf("ShouldInit(%q, marker %q) = %v, want %v", tt.args, tt.marker, got, tt.want)
			}
		})
	}
}

// TestInitReapsOrphans runs commands that leave an orphan behind (a
// background job, and a daemon that double-forks into its own session),
// lets the orphan exit after it has been reparented, and checks that it is
// reaped and that no zombie is left anywhere under the init. The last mode
// is the agent as PID 1 without the init, as before: there the orphan
// stays a zombie, which shows that the check can fail.
func TestInitReapsOrphans(t *testing.T) {
	t.Parallel()
	modes := []struct {
		name      string
		spec      agentSpec
		underInit bool
	}{
		{"pid 1", agentSpec{newPID: true}, true},
		{"--init", agentSpec{args: []string{"--init"}}, true},
		{"pid 1 without init", agentSpec{newPID: true, env: []string{initChildEnv + "=1"}}, false},
	}
	orphans := []struct{ name, shell string }{
		{"background job", `sh -c 'until [ -e GATE ]; do sleep 0.01; done; exit 3' >/dev/null 2>&1 & exit 0`},
		{"double fork", `(setsid sh -c 'until [ -e GATE ]; do sleep 0.01; done; exit 4' >/dev/null 2>&1 &); exit 0`},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			a := startAgent(t, m.spec)
			a.ready(t, m.underInit)
			known := map[int]bool{a.agentPID: true} // and earlier orphans
			for i, o := range orphans {
				gate := filepath.Join(a.dir, "gate"+strconv.Itoa(i))
				if res := a.exec(t, strings.ReplaceAll(o.shell, "GATE", gate)); res.ExitCode != 0 || res.Error != "" {
					t.Fatalf("%s: exec = %+v, want exit 0", o.name, res)
				}
				// The command has ended and been waited for, so its orphan
				// is now a child of the reaper (the init, or the agent
				// itself as PID 1 without one).
				kids := childrenOf(a.pid)
				for p := range known {
					delete(kids, p)
				}
				if len(kids) != 1 {
					t.Fatalf("%s: new children of %d = %s, want one orphan", o.name, a.pid, states(kids))
				}
				var orphan int
				for p, st := range kids {
					if orphan = p; st == 'Z' {
						t.Fatalf("%s: orphan %d is a zombie before it was let go", o.name, p)
					}
				}
				known[orphan] = true
				if err := os.WriteFile(gate, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				if !m.underInit {
					eventually(t, o.name+": orphan becomes a zombie of the agent", func() (bool, string) {
						pi := procs()[orphan]
						return pi == procInfo{a.pid, 'Z'}, fmt.Sprintf("%+v", pi)
					})
					continue
				}
				eventually(t, o.name+": orphan reaped", func() (bool, string) {
					st, there := childrenOf(a.pid)[orphan]
					return !there, fmt.Sprintf("orphan %d state %c", orphan, st)
				})
			}
			if m.underInit {
				eventually(t, "nothing but the agent under the init", a.onlyAgentLeft)
			}
		})
	}
}

// TestInitExecExitCodes runs 50 commands at once, each leaving two orphans
// that exit with other codes, in an agent that is PID 1 of its namespace:
// the init reaps the orphans while the agent waits for its commands, and
// every command must report its own exit code.
func TestInitExecExitCodes(t *testing.T) {
	t.Parallel()
	a := startAgent(t, agentSpec{newPID: true})
	a.ready(t, true)
	const n = 50
	codes := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			shell := fmt.Sprintf(`sh -c 'exit %d' >/dev/null 2>&1 & (setsid sh -c 'exit %d' >/dev/null 2>&1 &); exit %d`, 100+i, 200+i, i)
			res, err := a.tryExec(shell)
			codes[i] = res.ExitCode
			if err == nil && (res.Error != "" || res.TimedOut) {
				err = fmt.Errorf("exec %d: %+v", i, res)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("exec %d: %v", i, errs[i])
		} else if codes[i] != i {
			t.Errorf("exec %d: exit code %d, want %d", i, codes[i], i)
		}
	}
	eventually(t, "every orphan reaped", a.onlyAgentLeft)
}

// TestInitExit checks how the init ends: with the agent, with the agent's
// status (128+signal when a signal killed it), after passing signals on.
func TestInitExit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec agentSpec
		// act makes the agent end; it runs once the agent serves, or for
		// a holding agent once it has said so.
		act  func(t *testing.T, a *agentProc)
		want int
	}{
		{"SIGTERM to pid 1 stops the agent", agentSpec{newPID: true}, signalInit(syscall.SIGTERM), 0},
		{"SIGINT to pid 1 stops the agent", agentSpec{newPID: true}, signalInit(syscall.SIGINT), 0},
		{"SIGTERM to --init stops the agent", agentSpec{args: []string{"--init"}}, signalInit(syscall.SIGTERM), 0},
		// Go programs die of SIGHUP they do not handle, and exit 2 with a
		// goroutine dump on SIGQUIT.
		{"SIGHUP is passed on", agentSpec{newPID: true}, signalInit(syscall.SIGHUP), 128 + int(syscall.SIGHUP)},
		{"SIGQUIT is passed on", agentSpec{newPID: true}, signalInit(syscall.SIGQUIT), 2},
		{"agent killed", agentSpec{newPID: true}, func(t *testing.T, a *agentProc) {
			if err := syscall.Kill(a.agentPID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}, 128 + int(syscall.SIGKILL)},
		{"agent fails to start", agentSpec{newPID: true, args: []string{"--listen-fd", "1"}}, nil, 1},
		{"SIGTERM before the agent has handlers", agentSpec{newPID: true, mode: "hold"}, func(t *testing.T, a *agentProc) {
			if line, err := a.stdout.ReadString('\n'); line != "holding\n" {
				t.Fatalf("agent stdout = %q, %v; want holding", line, err)
			}
			a.agentPID = a.onlyChild(t)
			signalInit(syscall.SIGTERM)(t, a)
		}, 128 + int(syscall.SIGTERM)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := startAgent(t, tt.spec)
			if tt.spec.mode == "" && tt.act != nil {
				a.ready(t, true)
			}
			if tt.act != nil {
				tt.act(t, a)
			}
			if got := a.wait(t); got != tt.want {
				t.Errorf("init exit status = %d, want %d", got, tt.want)
			}
			// The init exits only after reaping the agent.
			if pi, there := procs()[a.agentPID]; a.agentPID != 0 && there {
				t.Errorf("agent %d still there (%+v) after the init exited", a.agentPID, pi)
			}
		})
	}
}

func signalInit(sig syscall.Signal) func(*testing.T, *agentProc) {
	return func(t *testing.T, a *agentProc) {
		t.Helper()
		if err := syscall.Kill(a.pid, sig); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAgentProcessLayout checks who serves and who is whose parent, with
// and without an init, and that SIGTERM ends either cleanly, killing a
// running command. Without PID 1 or --init the agent serves in the process
// started, as before the init existed.
func TestAgentProcessLayout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		spec      agentSpec
		underInit bool
	}{
		{"plain", agentSpec{}, false},
		{"--init", agentSpec{args: []string{"--init"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := startAgent(t, tt.spec)
			a.ready(t, tt.underInit)
			if tt.underInit == (a.agentPID == a.pid) {
				t.Fatalf("agent pid %d, process started %d: want them equal only without an init", a.agentPID, a.pid)
			}
			res := a.exec(t, `echo $PPID`)
			if want := strconv.Itoa(a.agentPID) + "\n"; res.Stdout != want || res.ExitCode != 0 {
				t.Errorf("exec's parent = %q (exit %d), want %q", res.Stdout, res.ExitCode, want)
			}
			sleeper := a.startStream(t, "exec sleep 300")
			if got := procs()[sleeper].ppid; got != a.agentPID {
				t.Errorf("running command %d has parent %d, want the agent %d", sleeper, got, a.agentPID)
			}
			signalInit(syscall.SIGTERM)(t, a)
			if got := a.wait(t); got != 0 {
				t.Errorf("exit status after SIGTERM = %d, want 0", got)
			}
			if alive(sleeper) {
				t.Errorf("command %d still running after the agent stopped", sleeper)
			}
			if pi, there := procs()[a.agentPID]; there {
				t.Errorf("agent %d still there (%+v) after the process started exited", a.agentPID, pi)
			}
		})
	}
}
