package local

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// cgroups creates one cgroup per sandbox under a parent directory in each
// usable hierarchy: the unified one on cgroup v2, or the memory, pids and
// cpu hierarchies on v1. Controllers it cannot write are left out and
// reported once in warning.
type cgroups struct {
	v2      bool
	parents map[string]string // controller ("memory", "pids", "cpu", or "" for v2) -> parent dir
	warning string            // why some or all limits are not enforced; "" when all are
}

// detectCgroups finds writable hierarchies and creates parent (a name like
// "orchard-envd") under the cgroup envd itself runs in.
func detectCgroups(parent string) *cgroups {
	own, mounts := ownCgroups(), cgroupMounts()
	if root, ok := mounts["cgroup2"]; ok && len(mounts) == 1 {
		return detectV2(root, own[""], parent)
	}
	c := &cgroups{parents: map[string]string{}}
	var missing []string
	for _, ctl := range []string{"memory", "pids", "cpu"} {
		mnt, ok := mounts[ctl]
		if !ok {
			missing = append(missing, ctl+" (not mounted)")
			continue
		}
		dir := filepath.Join(mnt, own[ctl], parent)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			missing = append(missing, fmt.Sprintf("%s (%v)", ctl, err))
			continue
		}
		c.parents[ctl] = dir
	}
	if len(missing) > 0 {
		c.warning = "cgroup v1 controllers unusable, their limits are not enforced: " + strings.Join(missing, ", ")
	}
	return c
}

// detectV2 prepares parent under the unified hierarchy with the memory,
// pids and cpu controllers delegated to it.
func detectV2(root, own, parent string) *cgroups {
	c := &cgroups{v2: true, parents: map[string]string{}}
	dir := filepath.Join(root, own, parent)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.warning = fmt.Sprintf("cgroup v2 not writable (%v); resource limits are not enforced", err)
		return c
	}
	// Enabling controllers for children fails in a cgroup that has
	// processes of its own, so the parent is a fresh, empty cgroup.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0); err != nil && d == dir {
			c.warning = fmt.Sprintf("cgroup v2 controllers not delegable (%v); resource limits are not enforced", err)
			return c
		}
	}
	c.parents[""] = dir
	return c
}

// ownCgroups maps each v1 controller (and "" for v2) to the cgroup path
// of this process, from /proc/self/cgroup.
func ownCgroups() map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out
}

// cgroupMounts maps each v1 controller to its mount point, and "cgroup2"
// to the unified mount when it is the only hierarchy with controllers.
func cgroupMounts() map[string]string {
	out := map[string]string{}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 {
			continue
		}
		switch tail[0] {
		case "cgroup2":
			if b, err := os.ReadFile(filepath.Join(fields[4], "cgroup.controllers")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
				out["cgroup2"] = fields[4]
			}
		case "cgroup":
			for _, opt := range strings.Split(tail[2], ",") {
				if opt == "memory" || opt == "pids" || opt == "cpu" {
					out[opt] = fields[4]
				}
			}
		}
	}
	if _, ok := out["cgroup2"]; ok && len(out) > 1 {
		delete(out, "cgroup2") // hybrid: the controllers live in v1
	}
	return out
}

// cgroup is one sandbox's cgroup directories.
type cgroup struct{ dirs []string }

// create makes sandbox id's cgroups and writes the limits of r. Limits
// whose controller is unavailable are returned as warnings.
func (c *cgroups) create(id string, r limits) (*cgroup, []string, error) {
	var warns []string
	if c.warning != "" && r.any() {
		warns = append(warns, c.warning)
	}
	g := &cgroup{}
	for ctl, parent := range c.parents {
		dir := filepath.Join(parent, id)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			g.destroy()
			return nil, nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		g.dirs = append(g.dirs, dir)
		for file, val := range r.files(ctl, c.v2) {
			if err := os.WriteFile(filepath.Join(dir, file), []byte(val), 0); err != nil {
				g.destroy()
				return nil, nil, fmt.Errorf("set %s=%s: %w", file, val, err)
			}
		}
	}
	return g, warns, nil
}

// add moves pid into every hierarchy of g.
func (g *cgroup) add(pid int) error {
	for _, dir := range g.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("add pid %d to %s: %w", pid, dir, err)
		}
	}
	return nil
}

// destroy kills whatever still runs in g and removes its directories,
// retrying briefly while the kernel finishes tearing processes down.
func (g *cgroup) destroy() {
	if g == nil {
		return
	}
	for _, dir := range g.dirs {
		removeCgroup(dir)
	}
}

// removeCgroup kills the processes in dir and removes it.
func removeCgroup(dir string) {
	for wait := time.Millisecond; wait < 2*time.Second; wait *= 2 {
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(wait) // EBUSY until the killed tasks are gone
	}
}

// limits are parsed resource limits; zero means unlimited.
type limits struct {
	memory   int64 // bytes
	pids     int64
	cpuMilli int64
}

func (l limits) any() bool { return l.memory > 0 || l.pids > 0 || l.cpuMilli > 0 }

// files returns the control files and values that set l for controller
// ctl ("" on v2).
func (l limits) files(ctl string, v2 bool) map[string]string {
	const period = 100000
	m := map[string]string{}
	if v2 {
		if l.memory > 0 {
			m["memory.max"] = strconv.FormatInt(l.memory, 10)
		}
		if l.pids > 0 {
			m["pids.max"] = strconv.FormatInt(l.pids, 10)
		}
		if l.cpuMilli > 0 {
			m["cpu.max"] = fmt.Sprintf("%d %d", l.cpuMilli*period/1000, period)
		}
		return m
	}
	switch {
	case ctl == "memory" && l.memory > 0:
		m["memory.limit_in_bytes"] = strconv.FormatInt(l.memory, 10)
	case ctl == "pids" && l.pids > 0:
		m["pids.max"] = strconv.FormatInt(l.pids, 10)
	case ctl == "cpu" && l.cpuMilli > 0:
		m["cpu.cfs_quota_us"] = strconv.FormatInt(l.cpuMilli*period/1000, 10)
	}
	return m
}

// parseLimits reads r; CPU and memory take Kubernetes quantity syntax.
func parseLimits(r envd.Resources) (limits, error) {
	l := limits{pids: r.PIDs}
	if r.Memory != "" {
		v, err := parseQuantity(r.Memory)
		if err != nil || v <= 0 {
			return l, envd.Errorf(envd.ErrBadRequest, "resources.memory %q: want bytes like \"512Mi\" or \"1G\"", r.Memory)
		}
		l.memory = v
	}
	if r.CPU != "" {
		v, err := parseMilli(r.CPU)
		if err != nil || v <= 0 {
			return l, envd.Errorf(envd.ErrBadRequest, "resources.cpu %q: want cores like \"0.5\" or \"500m\"", r.CPU)
		}
		l.cpuMilli = v
	}
	return l, nil
}
