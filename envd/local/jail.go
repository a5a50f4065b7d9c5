package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/orchard-rl/orchard/envd"
)

// agentMount is where the agent binary appears inside every jail, and
// egressMount the socket of envd's gate in network mode proxy.
const (
	agentMount  = "/.orchard/agent"
	egressMount = "/.orchard/egress.sock"
)

// systemDirs are the host directories a jail without an image sees,
// read-only; /etc comes filtered ([etcEntries]).
var systemDirs = []string{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// bwrapArgs builds the bubblewrap command line for a sandbox whose state
// lives in dir, with root as its root filesystem ("" means the minimal
// host root). The root is a tmpfs holding read-only binds, so the work
// directory (a size-limited tmpfs) can be created anywhere; /proc, /dev,
// /tmp and /run are fresh.
func (b *Backend) bwrapArgs(spec *envd.Spec, root, dir string, disk int64) []string {
	a := []string{"--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
		"--unshare-cgroup-try", "--hostname", "sandbox", "--cap-drop", "ALL"}
	if b.userNS {
		a = append(a, "--unshare-user", "--disable-userns", "--uid", strconv.Itoa(b.opts.SandboxUID),
			"--gid", strconv.Itoa(b.opts.SandboxGID))
	}
	if spec.Network != envd.NetworkHost {
		a = append(a, "--unshare-net")
	}
	if root == "" {
		a = append(a, b.hostRoot...)
	} else {
		a = append(a, imageRootArgs(root, spec.Workdir)...)
	}
	size := strconv.FormatInt(disk, 10)
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/tmp", "--tmpfs", "/run")
	if root == "" {
		a = append(a, b.hideArgs()...)
	}
	a = append(a, "--ro-bind", b.agentPath, agentMount)
	if spec.Egress != nil {
		a = append(a, "--bind", filepath.Join(dir, "egress.sock"), egressMount)
	}
	a = append(a, "--perms", "0755", "--size", size, "--tmpfs", spec.Workdir,
		"--remount-ro", "/", "--chdir", spec.Workdir,
		"--clearenv", "--setenv", "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"--setenv", "HOME", spec.Workdir, "--setenv", "HOSTNAME", "sandbox")
	for _, kv := range b.opts.AgentEnv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			a = append(a, "--setenv", k, v)
		}
	}
	a = append(a, agentMount)
	a = append(a, b.opts.AgentArgs...)
	a = append(a, "--listen-fd", "3", "--workdir", spec.Workdir)
	if spec.Egress != nil {
		a = append(a, "--egress-listen", "127.0.0.1:"+strconv.Itoa(spec.Egress.Port), "--egress-socket", egressMount)
	}
	return a
}

// imageRootArgs binds each top-level entry of an image's root
// filesystem read-only, except those the jail makes itself.
func imageRootArgs(root, workdir string) []string {
	workTop := strings.SplitN(strings.TrimPrefix(workdir, "/"), "/", 2)[0]
	var a []string
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
	}
	return a
}

// hideArgs covers the state dir and the Hide paths with empty tmpfs
// where they would be visible in the minimal host root.
func (b *Backend) hideArgs() []string {
	var a []string
	for _, p := range append([]string{b.opts.StateDir}, b.opts.Hide...) {
		top := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)[0]
		if slices.Contains(systemDirs, top) || top == "etc" {
			if _, err := os.Stat(p); err == nil {
				a = append(a, "--tmpfs", p, "--remount-ro", p)
			}
		}
	}
	return a
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
	bx.egress.close()
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
