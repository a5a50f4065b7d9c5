package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orchard-rl/orchard/envd"
)

// cgroup2Root returns the mount point of the real cgroup v2 hierarchy:
// the first cgroup2 mount of this mount namespace, else one the test
// mounts on a temporary directory (which needs root). It skips when there
// is neither.
func cgroup2Root(t *testing.T) string {
	t.Helper()
	root, ok := cgroupMounts()["cgroup2"]
	if !ok {
		root = t.TempDir()
		if err := unix.Mount("none", root, "cgroup2", 0, ""); err != nil {
			t.Skipf("no cgroup2 hierarchy is mounted, and mounting one on %s failed: %v", root, err)
		}
		t.Cleanup(func() { _ = unix.Unmount(root, 0) })
	}
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		t.Skipf("%s is not a cgroup2 filesystem (statfs type %#x, %v)", root, st.Type, err)
	}
	return root
}

// v2Parent is a parent cgroup name unique to this process and test.
func v2Parent(t *testing.T) string {
	return fmt.Sprintf("orchard-test-%d-%s", os.Getpid(), strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
}

// newV2Env is newEnv with the backend's cgroups on the cgroup2 hierarchy
// at root, whatever detectCgroups picks on this machine (a hybrid machine
// picks v1). The parent cgroup is removed after the sandboxes.
func newV2Env(t *testing.T) (e *env, root string) {
	t.Helper()
	root = cgroup2Root(t)
	opts := testOptions(stateDir(t))
	opts.CgroupParent = "-"
	b, err := New(opts)
	if err != nil {
		t.Skipf("local backend unavailable: %v", err)
	}
	b.cg = detectV2(root, ownCgroups()[""], v2Parent(t))
	if dir := b.cg.parents[""]; dir != "" {
		t.Cleanup(func() {
			if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("remove parent cgroup: %v", err)
			}
		})
	}
	return newEnvOn(t, b, envd.Options{}), root
}

// notOffered is the reason detectV2 gives for a controller that envd's
// cgroup (base) is not offered.
func notOffered(base string) string {
	return "is not in " + base + "/cgroup.controllers (it is bound to a cgroup v1 hierarchy or not delegated to envd's cgroup)"
}

// TestCgroupV2Sandbox runs a jail with its cgroup on the real cgroup2
// hierarchy: the sandbox cgroup is created, the jail and every command in
// it are moved in (the kernel says so, from inside and outside), each
// limit is either written or named in a warning, and delete kills what
// is in the cgroup, even a process outside the jail, and removes it.
func TestCgroupV2Sandbox(t *testing.T) {
	t.Parallel()
	e, root := newV2Env(t)
	cg := e.b.cg
	parent := cg.parents[""]
	if parent == "" {
		t.Skipf("cannot create cgroups on the cgroup2 hierarchy at %s: %s", root, cg.warning)
	}
	base := filepath.Dir(parent)
	offered := words(filepath.Join(base, "cgroup.controllers"))
	sb := e.create(t, envd.Spec{Resources: envd.Resources{PIDs: 16, Memory: "64Mi", CPU: "250m"}})
	dir := filepath.Join(parent, sb.ID())
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("sandbox cgroup %s: %v", dir, err)
	}

	// Every limit is enforced (its file holds the value) or named in
	// exactly one warning that says why (exactly, or starting so when the
	// kernel's error text follows).
	type warning struct {
		text  string
		exact bool
	}
	var warns []warning
	for _, l := range []struct{ ctl, file, val string }{
		{"memory", "memory.max", "67108864"}, {"pids", "pids.max", "16"}, {"cpu", "cpu.max", "25000 100000"},
	} {
		prefix := fmt.Sprintf("resources.%s is not enforced: cgroup v2 controller %s ", l.ctl, l.ctl)
		switch {
		case cg.enforces(l.ctl):
			if b, err := os.ReadFile(filepath.Join(dir, l.file)); err != nil || strings.TrimSpace(string(b)) != l.val {
				t.Errorf("%s = %q, %v; want %q", l.file, b, err, l.val)
			}
		case !offered[l.ctl]:
			warns = append(warns, warning{prefix + notOffered(base), true})
		default: // offered but not enabled: base has processes of its own
			warns = append(warns, warning{prefix + "cannot be enabled: " + base + " has processes of its own", false})
		}
	}
	if len(sb.Info.Warnings) != len(warns) {
		t.Errorf("warnings %q, want %d like %+v", sb.Info.Warnings, len(warns), warns)
	}
	for i := range min(len(warns), len(sb.Info.Warnings)) {
		w, got := warns[i], sb.Info.Warnings[i]
		if (w.exact && got != w.text) || (!w.exact && !strings.HasPrefix(got, w.text)) {
			t.Errorf("warning %d = %q, want %q (exact %v)", i, got, w.text, w.exact)
		}
	}

	// From inside: a command and its background child are in the sandbox
	// cgroup, which is the root of the jail's cgroup namespace (bubblewrap
	// starts in it), so no host path shows.
	got := run(t, sb, `sleep 300 & grep '^0::' /proc/$!/cgroup; grep '^0::' /proc/self/cgroup; kill $!`)
	if want := "0::/\n0::/\n"; got.Stdout != want {
		t.Errorf("cgroup seen inside = %q (stderr %q), want %q", got.Stdout, got.Stderr, want)
	}
	// From outside: the jail (bubblewrap and all its descendants) is in
	// cgroup.procs.
	var m meta
	data, _ := os.ReadFile(filepath.Join(e.b.opts.StateDir, "s", sb.ID(), "meta.json"))
	if err := json.Unmarshal(data, &m); err != nil || m.PID == 0 {
		t.Fatalf("meta = %s, %v", data, err)
	}
	// The jail's processes are listed first and cgroup.procs read after,
	// so a process the jail starts in between is not missed; one that is in
	// neither snapshot is judged by the kernel's own view, /proc/PID/cgroup
	// (a clean-clone CI run once saw an exec's child appear in between).
	pids := append([]int{m.PID}, childrenOf(m.PID)...)
	procs := words(filepath.Join(dir, "cgroup.procs"))
	rel := "0::" + strings.TrimPrefix(dir, root)
	for _, pid := range pids {
		if procs[strconv.Itoa(pid)] {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			continue // gone since it was listed
		}
		if !slices.Contains(strings.Split(strings.TrimSpace(string(b)), "\n"), rel) {
			t.Errorf("jail process %d is not in %s (cgroup.procs %v); its cgroups:\n%s", pid, dir, procs, b)
		}
	}
	if len(procs) < 3 {
		t.Errorf("cgroup.procs = %v, want bubblewrap, its init and the agent at least", procs)
	}

	// A process outside the jail but inside its cgroup dies with it.
	stray := exec.Command("sleep", "300")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- stray.Wait() }() // ends when the process does; the failure path kills it
	if err := writeCgroupFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(stray.Process.Pid)); err != nil {
		t.Fatalf("move a process into the sandbox cgroup: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if ws, ok := stray.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("process in the sandbox cgroup ended with %v after delete, want SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("process in the sandbox cgroup still runs 10 s after delete")
		_ = stray.Process.Kill()
		<-exited
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sandbox cgroup after delete: %v, want not exist", err)
	}
}

// TestCgroupV2Detect checks detectV2 against the real cgroup2 hierarchy:
// what it creates and enables, and the reason it gives for each
// controller it cannot use.
func TestCgroupV2Detect(t *testing.T) {
	t.Parallel()
	root := cgroup2Root(t)
	own := ownCgroups()[""]
	base := filepath.Join(root, own)
	// mkcg creates a cgroup under base, removed at cleanup.
	mkcg := func(t *testing.T, name string) string {
		dir := filepath.Join(base, v2Parent(t)+"-"+name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Skipf("cannot create a cgroup under %s: %v", base, err)
		}
		t.Cleanup(func() { removeCgroup(dir) })
		return dir
	}

	t.Run("fresh parent", func(t *testing.T) {
		c := detectV2(root, own, v2Parent(t))
		dir := c.parents[""]
		if dir == "" {
			t.Skipf("cannot create cgroups under %s: %s", base, c.warning)
		}
		t.Cleanup(func() { removeCgroup(dir) })
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC || dir != filepath.Join(base, v2Parent(t)) {
			t.Fatalf("parent %s: statfs type %#x, %v; want a cgroup2 directory under %s", dir, st.Type, err, base)
		}
		offered := words(filepath.Join(base, "cgroup.controllers"))
		subtree := words(filepath.Join(dir, "cgroup.subtree_control"))
		var parts []string
		for _, ctl := range controllers {
			why, missing := c.missing[ctl]
			switch {
			case !offered[ctl]:
				if why != notOffered(base) {
					t.Errorf("%s: reason %q, want %q", ctl, why, notOffered(base))
				}
				parts = append(parts, ctl+" "+why)
			case missing:
				if !strings.Contains(why, base+" has processes of its own") {
					t.Errorf("%s is offered but missing: %q", ctl, why)
				}
				parts = append(parts, ctl+" "+why)
			case !subtree[ctl]:
				t.Errorf("%s enabled per detectV2 but not in %s/cgroup.subtree_control %v", ctl, dir, subtree)
			}
		}
		want := ""
		if len(parts) > 0 {
			want = "cgroup v2 controllers unusable, their limits are not enforced: " + strings.Join(parts, "; ")
		}
		if c.warning != want {
			t.Errorf("warning = %q, want %q", c.warning, want)
		}
		t.Logf("%s offers %v; detectV2 enabled %v", base, offered, c.enabled)
	})

	t.Run("depth limit", func(t *testing.T) {
		// cgroup.max.depth 0 makes the kernel refuse children: envd's
		// cgroup is unwritable for real. Sandboxes still run, with one
		// warning per limit.
		lim := mkcg(t, "nodepth")
		if err := writeCgroupFile(filepath.Join(lim, "cgroup.max.depth"), "0"); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(lim, root)
		c := detectV2(root, rel, "orchard-envd")
		why := fmt.Sprintf("is unusable: the cgroup v2 hierarchy is not writable (mkdir %s/orchard-envd: resource temporarily unavailable)", lim)
		for _, ctl := range controllers {
			if c.missing[ctl] != why {
				t.Errorf("%s: reason %q, want %q", ctl, c.missing[ctl], why)
			}
		}
		if len(c.parents) != 0 || c.enforces("pids") {
			t.Errorf("parents %v, enforces pids %v; want none, false", c.parents, c.enforces("pids"))
		}
		g, warns, err := c.create("sb-depth", limits{pids: 8})
		if err != nil || len(g.dirs) != 0 {
			t.Fatalf("create = %v, %v; want no cgroups and no error", g.dirs, err)
		}
		if want := "resources.pids is not enforced: cgroup v2 controller pids " + why; len(warns) != 1 || warns[0] != want {
			t.Errorf("warnings %q, want [%q]", warns, want)
		}
	})

	t.Run("busy cgroup", func(t *testing.T) {
		// A non-root cgroup with processes of its own cannot enable
		// controllers for children (EBUSY).
		busy := mkcg(t, "busy")
		avail := words(filepath.Join(busy, "cgroup.controllers"))
		var usable []string
		for _, ctl := range controllers {
			if avail[ctl] {
				usable = append(usable, ctl)
			}
		}
		if len(usable) == 0 {
			sub, _ := os.ReadFile(filepath.Join(base, "cgroup.subtree_control"))
			t.Skipf("%s/cgroup.subtree_control is %q: no child cgroup is offered memory, pids or cpu, so the EBUSY path cannot be reached here",
				base, strings.TrimSpace(string(sub)))
		}
		sleeper := exec.Command("sleep", "300")
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
		if err := writeCgroupFile(filepath.Join(busy, "cgroup.procs"), strconv.Itoa(sleeper.Process.Pid)); err != nil {
			t.Fatal(err)
		}
		c := detectV2(root, strings.TrimPrefix(busy, root), "orchard-envd")
		t.Cleanup(func() { removeCgroup(filepath.Join(busy, "orchard-envd")) })
		for _, ctl := range usable {
			if why := c.missing[ctl]; !strings.Contains(why, busy+" has processes of its own") || !strings.Contains(why, "device or resource busy") {
				t.Errorf("%s: reason %q, want EBUSY explained", ctl, why)
			}
		}
	})
}
