package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/orchard-rl/orchard/envd"
)

// agentMount is where the agent binary appears inside every jail.
const agentMount = "/.orchard/agent"

// bwrapArgs builds the bubblewrap command line for a sandbox whose state
// lives in dir. The root is a tmpfs holding read-only binds of each
// top-level entry of the image (or host) root, so the work directory can
// be created anywhere; /proc, /dev, /tmp and /run are fresh, and the state
// dir and the work dir's own top-level host entry are not visible.
func (b *Backend) bwrapArgs(spec *envd.Spec, dir string) []string {
	a := []string{"--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--hostname", "sandbox", "--cap-drop", "ALL"}
	if b.userNS {
		a = append(a, "--unshare-user", "--uid", "0", "--gid", "0")
	}
	network := spec.Network
	if network == "" {
		network = b.opts.Network
	}
	if network == "none" {
		a = append(a, "--unshare-net")
	}
	root := spec.Image
	if root == "" {
		root = "/"
	}
	workTop := strings.SplitN(strings.TrimPrefix(spec.Workdir, "/"), "/", 2)[0]
	bound := map[string]bool{}
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		name := e.Name()
		switch name {
		case "proc", "dev", "tmp", "run", "lost+found", ".orchard", workTop:
			continue
		}
		src := filepath.Join(root, name)
		if e.Type()&os.ModeSymlink != 0 {
			if target, err := os.Readlink(src); err == nil {
				a = append(a, "--symlink", target, "/"+name)
			}
			continue
		}
		a = append(a, "--ro-bind", src, "/"+name)
		bound[name] = true
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run")
	for _, p := range append([]string{b.opts.StateDir}, b.opts.Hide...) {
		if top := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)[0]; bound[top] && spec.Image == "" {
			a = append(a, "--tmpfs", p)
		}
	}
	a = append(a, "--ro-bind", b.opts.AgentPath, agentMount,
		"--bind", filepath.Join(dir, "work"), spec.Workdir,
		"--remount-ro", "/", "--chdir", spec.Workdir,
		"--clearenv", "--setenv", "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"--setenv", "HOME", spec.Workdir, "--setenv", "HOSTNAME", "sandbox")
	for _, kv := range b.opts.AgentEnv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			a = append(a, "--setenv", k, v)
		}
	}
	a = append(a, "--block-fd", "4", agentMount)
	a = append(a, b.opts.AgentArgs...)
	return append(a, "--listen-fd", "3", "--workdir", spec.Workdir)
}

// addTree moves pid and its descendants (the jail's init, blocked before
// it runs the agent) into g.
func addTree(g *cgroup, pid int) error {
	for _, p := range append([]int{pid}, childrenOf(pid)...) {
		if err := g.add(p); err != nil {
			return err
		}
	}
	return nil
}

// childrenOf lists descendants of pid from /proc/PID/task/*/children.
func childrenOf(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
				out = append(out, childrenOf(c)...)
			}
		}
	}
	return out
}

// startTime returns field 22 of /proc/PID/stat, which together with the
// pid identifies a process across pid reuse; "" if it is gone.
func startTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// Delete kills the jail (its PID namespace dies with it), then removes its
// cgroups and directory. An unknown id still has its directory removed.
func (b *Backend) Delete(ctx context.Context, id string) error {
	b.mu.Lock()
	bx, ok := b.boxes[id]
	delete(b.boxes, id)
	b.mu.Unlock()
	if !ok {
		return b.removeOrphan(id)
	}
	if err := b.teardownCtx(ctx, bx); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	return nil
}

// teardown is teardownCtx without a deadline, for failed creates.
func (b *Backend) teardown(bx *box) { _ = b.teardownCtx(context.Background(), bx) }

func (b *Backend) teardownCtx(ctx context.Context, bx *box) error {
	if bx.cmd != nil && bx.cmd.Process != nil {
		pid := bx.cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		select {
		case <-bx.done:
		case <-ctx.Done():
			return fmt.Errorf("wait for jail exit: %w", ctx.Err())
		}
	}
	if bx.tr != nil {
		bx.tr.CloseIdleConnections()
	}
	bx.cg.destroy()
	if err := os.RemoveAll(bx.dir); err != nil {
		return fmt.Errorf("remove sandbox dir: %w", err)
	}
	return nil
}

// Sweep kills and removes sandboxes in the state dir that keep rejects:
// those an earlier envd left when it crashed.
func (b *Backend) Sweep(_ context.Context, keep func(string) bool) (int, error) {
	ents, err := os.ReadDir(filepath.Join(b.opts.StateDir, "s"))
	if err != nil {
		return 0, fmt.Errorf("read state dir: %w", err)
	}
	n := 0
	var errs []error
	for _, e := range ents {
		id := e.Name()
		b.mu.Lock()
		_, live := b.boxes[id]
		live = live || b.creating[id]
		b.mu.Unlock()
		if live || keep(id) {
			continue
		}
		if err := b.removeOrphan(id); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// removeOrphan kills the jail recorded in id's meta.json if that process
// still runs, and removes the directory and cgroups.
func (b *Backend) removeOrphan(id string) error {
	dir := filepath.Join(b.opts.StateDir, "s", id)
	if data, err := os.ReadFile(filepath.Join(dir, "meta.json")); err == nil {
		var m meta
		if json.Unmarshal(data, &m) == nil && m.PID > 0 && m.StartTime != "" && startTime(m.PID) == m.StartTime {
			_ = syscall.Kill(-m.PID, syscall.SIGKILL)
			_ = syscall.Kill(m.PID, syscall.SIGKILL)
		}
	}
	if b.cg != nil {
		for _, parent := range b.cg.parents {
			removeCgroup(filepath.Join(parent, id))
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove orphan %s: %w", id, err)
	}
	return nil
}
