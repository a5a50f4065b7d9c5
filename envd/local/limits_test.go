package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/envd"
)

// TestDefaultLimits: a sandbox whose spec gives no resources gets the
// documented defaults: its cgroups hold pids 1024, memory 4Gi and cpu 2,
// a fork bomb stops under the default pids limit, and the work dir is a
// 4Gi tmpfs; a sandbox with disk 8Mi cannot write past it.
func TestDefaultLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envd.Options{})
	sb := e.create(t, envd.Spec{})
	if got := run(t, sb, "df -B1 --output=size /work /tmp | tail -n +2 | tr -d ' '"); got.Stdout != "4294967296\n4294967296\n" {
		t.Errorf("work dir and /tmp sizes = %q, want 4Gi each", got.Stdout)
	}
	small := e.create(t, envd.Spec{Resources: envd.Resources{Disk: "8Mi"}})
	res := run(t, small, "dd if=/dev/zero of=big bs=1M count=20 2>&1 | grep -o 'No space left on device' | head -1; stat -c %s big")
	if res.Stdout != "No space left on device\n8388608\n" {
		t.Errorf("filling a disk 8Mi work dir: %q, want ENOSPC at 8388608 bytes", res.Stdout)
	}
	if _, err := e.c.Create(t.Context(), envd.Spec{Resources: envd.Resources{Disk: "1k"}}); !isStatus(err, 400) {
		t.Errorf("create with disk 1k = %v, want 400", err)
	}
	if e.b.cg == nil || !e.b.cg.enforces("pids") {
		t.Skip("the pids controller is not usable here; see TestCgroupEnforced")
	}
	want := map[string]map[string]string{
		"pids":   {"pids.max": "1024"},
		"memory": {"memory.limit_in_bytes": "4294967296", "memory.max": "4294967296"},
		"cpu":    {"cpu.cfs_quota_us": "200000", "cpu.max": "200000 100000"},
	}
	for ctl, files := range want {
		if !e.b.cg.enforces(ctl) {
			continue
		}
		dir := filepath.Join(e.b.cg.parents[ctl], sb.ID())
		if e.b.cg.v2 {
			dir = filepath.Join(e.b.cg.parents[""], sb.ID())
		}
		for f, v := range files {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil && strings.TrimSpace(string(b)) != v {
				t.Errorf("%s/%s = %q, want %q", dir, f, strings.TrimSpace(string(b)), v)
			}
		}
	}
	// 1100 background jobs under the default pids.max 1024: the shell's
	// forks fail before the last one, counted from the inside.
	res = run(t, sb, `i=0; while [ $i -lt 1100 ]; do sleep 60 & i=$((i+1)); done 2>/dev/null; set -- /proc/[0-9]*; echo $#`)
	if res.ExitCode == 0 || res.Stdout != "" {
		t.Errorf("1100 jobs under the default pids limit: %+v, want the shell to fail forking", res)
	}
	pids := filepath.Join(e.b.cg.parents["pids"], sb.ID())
	if e.b.cg.v2 {
		pids = filepath.Join(e.b.cg.parents[""], sb.ID())
	}
	if n := counter(t, filepath.Join(pids, "pids.events"), "max"); n < 1 {
		t.Errorf("pids.events max = %d, want at least 1", n)
	}
}
