package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/envd"
)

// TestCgroupEnforced checks, on each cgroup version this machine can
// give, that pids.max stops a fork bomb and that the memory limit
// OOM-kills a command that outgrows it while the sandbox lives on. Each
// version skips, saying why, where its controllers are not usable.
func TestCgroupEnforced(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  func(t *testing.T) *env
		// oom names the control file and its field that count OOM kills.
		oomFile string
	}{
		{"v1", func(t *testing.T) *env {
			e := newEnv(t, envd.Options{})
			if e.b.cg == nil || e.b.cg.v2 {
				t.Skip("this machine has no cgroup v1 hierarchies: detectCgroups picked v2")
			}
			return e
		}, "memory.oom_control"},
		{"v2", func(t *testing.T) *env {
			e, root := newV2Env(t)
			if !e.b.cg.enforces("pids") || !e.b.cg.enforces("memory") {
				base := filepath.Join(root, ownCgroups()[""])
				offered, _ := os.ReadFile(filepath.Join(base, "cgroup.controllers"))
				t.Skipf("cgroup v2 enforcement of pids.max and memory.max cannot be tested here: %s/cgroup.controllers is %q and %s",
					base, strings.TrimSpace(string(offered)), v1Bound(t, "memory", "pids"))
			}
			return e
		}, "memory.events"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.env(t)
			if !e.b.cg.enforces("pids") || !e.b.cg.enforces("memory") {
				t.Skipf("pids or memory limits are not enforced: %s", e.b.cg.warning)
			}
			if swap := swapTotal(t); swap != "0" {
				t.Skipf("swap is on (SwapTotal %s kB): a memory limit swaps instead of OOM-killing", swap)
			}
			sb := e.create(t, envd.Spec{Resources: envd.Resources{PIDs: 32, Memory: "256Mi"}})
			dir := func(ctl string) string {
				if e.b.cg.v2 {
					return filepath.Join(e.b.cg.parents[""], sb.ID())
				}
				return filepath.Join(e.b.cg.parents[ctl], sb.ID())
			}

			// Fork bomb: 64 background jobs under pids.max 32 (the jail's
			// own processes and the agent's threads count too). dash gives
			// up at the first failed fork, leaving the jobs it started.
			res := run(t, sb, `for i in $(seq 64); do sleep 60 & echo $! >> bomb.pids; done; echo all started`)
			if res.ExitCode == 0 || res.Stdout != "" || (!strings.Contains(res.Stderr, "fork") && !strings.Contains(res.Stderr, "Resource temporarily unavailable")) {
				t.Errorf("64 jobs under pids.max=32: %+v, want a fork failure", res)
			}
			if n := counter(t, filepath.Join(dir("pids"), "pids.events"), "max"); n < 1 {
				t.Errorf("pids.events max = %d, want at least 1", n)
			}
			// Lift the limit from outside first: the jobs hold every pid,
			// so even the agent's fork of the cleanup shell could fail.
			if err := os.WriteFile(filepath.Join(dir("pids"), "pids.max"), []byte("max"), 0o644); err != nil {
				t.Fatalf("lift pids.max: %v", err)
			}
			// Kill the jobs and wait until the jail's init has reaped them.
			res = run(t, sb, `while read p; do kill $p; done < bomb.pids; `+
				`while read p; do while [ -e /proc/$p ]; do :; done; done < bomb.pids; echo reaped`)
			if res.Stdout != "reaped\n" {
				t.Fatalf("cleaning up the fork bomb: %+v", res)
			}

			// A command that touches 1 GiB under a 256 MiB limit is
			// OOM-killed: 137 is 128+SIGKILL.
			res = run(t, sb, `dd if=/dev/zero of=/dev/null bs=1G count=1`)
			if res.ExitCode != 137 {
				t.Errorf("dd bs=1G under memory 256Mi: exit %d, stderr %q; want 137 (OOM-killed)", res.ExitCode, res.Stderr)
			}
			if n := counter(t, filepath.Join(dir("memory"), tt.oomFile), "oom_kill"); n < 1 {
				t.Errorf("%s oom_kill = %d, want at least 1", tt.oomFile, n)
			}
			if got := run(t, sb, "echo alive"); got.Stdout != "alive\n" {
				t.Errorf("after the OOM kill: %+v, want the sandbox to serve", got)
			}
		})
	}
}

// counter reads field name of a flat-keyed cgroup file ("name N" lines).
func counter(t *testing.T, path, name string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", path, line, err)
			}
			return n
		}
	}
	t.Fatalf("%s has no %q line:\n%s", path, name, b)
	return 0
}

// swapTotal returns SwapTotal from /proc/meminfo, in kB.
func swapTotal(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SwapTotal:"); ok {
			return strings.TrimSuffix(strings.TrimSpace(v), " kB")
		}
	}
	return "0"
}

// v1Bound says which of ctls /proc/cgroups shows bound to a cgroup v1
// hierarchy (a controller can be in one hierarchy only).
func v1Bound(t *testing.T, ctls ...string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return fmt.Sprintf("/proc/cgroups is unreadable (%v)", err)
	}
	hier := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[1] != "0" {
			hier[f[0]] = f[1]
		}
	}
	var parts []string
	for _, ctl := range ctls {
		if h, ok := hier[ctl]; ok {
			parts = append(parts, fmt.Sprintf("%s is bound to cgroup v1 hierarchy %s", ctl, h))
		} else {
			parts = append(parts, ctl+" is in no v1 hierarchy (not delegated to this cgroup)")
		}
	}
	return strings.Join(parts, ", ")
}
