package local

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/client"
)

// waitExit blocks until pid has exited, using a pidfd (no polling).
func waitExit(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return
	}
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// TestCrashSweep runs envd as its own process, creates a sandbox, kills
// envd with SIGKILL and checks that a new envd on the same state dir
// removes what is left: the jail's processes, its directory, its cgroups.
func TestCrashSweep(t *testing.T) {
	t.Parallel()
	state := stateDir(t)
	cgParent := fmt.Sprintf("orchard-test-%d-crash", os.Getpid())
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveModeEnv+"="+state, "ORCHARD_ENVD_TEST_CGROUP="+cgParent)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("envd did not start: %v", err)
	}
	c := client.New(client.Options{BaseURL: strings.TrimSpace(url)})
	sb, err := c.Create(context.Background(), envd.Spec{Resources: envd.Resources{PIDs: 64}})
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal(err)
	}
	var m meta
	data, _ := os.ReadFile(filepath.Join(state, "s", sb.ID(), "meta.json"))
	if err := json.Unmarshal(data, &m); err != nil || m.PID == 0 {
		t.Fatalf("meta = %s, %v", data, err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	waitExit(t, m.PID) // --die-with-parent: the jail dies with envd

	opts := testOptions(state)
	opts.CgroupParent = cgParent
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	n, err := b.Sweep(context.Background(), func(string) bool { return false })
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1, nil", n, err)
	}
	if _, err := os.Stat(filepath.Join(state, "s", sb.ID())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sandbox dir after sweep: %v, want not exist", err)
	}
	for _, parent := range b.cg.parents {
		if _, err := os.Stat(filepath.Join(parent, sb.ID())); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s after sweep: %v, want not exist", filepath.Join(parent, sb.ID()), err)
		}
		_ = os.Remove(parent)
	}
}

// TestSweepKillsSurvivor covers a jail that outlived its envd (one started
// without --die-with-parent, say): the sweep kills it by its recorded pid.
func TestSweepKillsSurvivor(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	survivor := exec.Command("sleep", "300")
	survivor.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := survivor.Start(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(b.opts.StateDir, "s", "sb-survivor")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(meta{ID: "sb-survivor", PID: survivor.Process.Pid, StartTime: startTime(survivor.Process.Pid)})
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	keepDir := filepath.Join(b.opts.StateDir, "s", "sb-kept")
	_ = os.MkdirAll(keepDir, 0o700)
	n, err := b.Sweep(context.Background(), func(id string) bool { return id == "sb-kept" })
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1, nil", n, err)
	}
	err = survivor.Wait()
	if ws, ok := survivor.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("survivor ended with %v, want SIGKILL", err)
	}
	if _, err := os.Stat(keepDir); err != nil {
		t.Errorf("kept sandbox dir removed: %v", err)
	}
}

// TestCgroupLimits checks that limits are written and enforced where a
// writable hierarchy exists (cgroup v1 or v2), and that they degrade to a
// warning where none does.
func TestCgroupLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envd.Options{})
	if e.b.cg == nil || len(e.b.cg.parents) == 0 {
		sb := e.create(t, envd.Spec{Resources: envd.Resources{PIDs: 16}})
		if len(sb.Info.Warnings) == 0 {
			t.Errorf("no cgroups and no warning")
		}
		t.Skipf("no writable cgroup hierarchy here: %s", e.b.cg.warning)
	}
	sb := e.create(t, envd.Spec{Resources: envd.Resources{PIDs: 16, Memory: "256Mi", CPU: "500m"}})
	want := map[string]string{"pids.max": "16", "memory.limit_in_bytes": "268435456", "cpu.cfs_quota_us": "50000"}
	if e.b.cg.v2 {
		want = map[string]string{"pids.max": "16", "memory.max": "268435456", "cpu.max": "50000 100000"}
	}
	for file, val := range want {
		found := false
		for _, parent := range e.b.cg.parents {
			if b, err := os.ReadFile(filepath.Join(parent, sb.ID(), file)); err == nil {
				found = true
				if got := strings.TrimSpace(string(b)); got != val {
					t.Errorf("%s = %q, want %q", file, got, val)
				}
			}
		}
		if !found && !strings.Contains(e.b.cg.warning, strings.Split(file, ".")[0]) {
			t.Errorf("%s not set and no warning about it", file)
		}
	}
	if e.b.cg.enforces("pids") {
		// Seen once in a full parallel run: all 40 forks succeeded. Until
		// that is understood, try three times (a sandbox outside its
		// cgroup fails all three) and say what the kernel counted.
		var res *envd.ExecResult
		for try := 0; try < 3; try++ {
			res = run(t, sb, `for i in $(seq 40); do sleep 5 & done; kill $(jobs -p) 2>/dev/null; echo started`)
			if strings.Contains(res.Stderr, "fork") || strings.Contains(res.Stderr, "Resource temporarily unavailable") {
				return
			}
		}
		var counted []string
		for _, parent := range e.b.cg.parents {
			for _, f := range []string{"pids.max", "pids.current", "cgroup.procs"} {
				b, err := os.ReadFile(filepath.Join(parent, sb.ID(), f))
				counted = append(counted, fmt.Sprintf("%s=%q(%v)", f, strings.TrimSpace(string(b)), err))
			}
		}
		t.Errorf("40 background jobs under pids.max=16, 3 tries: stdout %q stderr %q, want a fork failure; cgroup: %v",
			res.Stdout, res.Stderr, counted)
	}
}

// TestSweepSparesCreating: envd sweeps at start while it already serves,
// so a sandbox whose directory exists but whose Create has not returned
// must not be taken for an orphan (a clean-clone CI run lost one so).
func TestSweepSparesCreating(t *testing.T) {
	t.Parallel()
	state := stateDir(t)
	b, err := New(testOptions(state))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(state, "s", "sb-creating")
	if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	b.creating["sb-creating"] = true
	b.mu.Unlock()
	if n, err := b.Sweep(context.Background(), func(string) bool { return false }); n != 0 || err != nil {
		t.Fatalf("Sweep = %d, %v; want 0, nil", n, err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the sandbox being created was swept: %v", err)
	}
	b.mu.Lock()
	delete(b.creating, "sb-creating")
	b.mu.Unlock()
	if n, err := b.Sweep(context.Background(), func(string) bool { return false }); n != 1 || err != nil {
		t.Fatalf("Sweep after the create failed = %d, %v; want 1, nil", n, err)
	}
}
