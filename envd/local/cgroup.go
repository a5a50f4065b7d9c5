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

// controllers are the ones the limits use, in the order warnings name them.
var controllers = []string{"memory", "pids", "cpu"}

// cgroups creates one cgroup per sandbox under a parent directory in each
// usable hierarchy: the unified one on cgroup v2, or the memory, pids and
// cpu hierarchies on v1. Controllers it cannot use are left out, logged
// once (warning) and named in the warnings of each sandbox that asks for
// their limits. On v2 the sandbox cgroup exists even without controllers:
// it still tracks every process of the sandbox and kills them on delete.
type cgroups struct {
	v2      bool
	parents map[string]string // controller ("memory", "pids", "cpu", or "" for v2) -> parent dir
	enabled []string          // v2: controllers enabled for the sandbox cgroups
	missing map[string]string // controller -> why its limits are not enforced
	warning string            // all of missing in one line; "" when every limit is enforced
}

func newCgroups(v2 bool) *cgroups {
	return &cgroups{v2: v2, parents: map[string]string{}, missing: map[string]string{}}
}

// detectCgroups finds writable hierarchies and creates parent (a name like
// "orchard-envd") under the cgroup envd itself runs in.
func detectCgroups(parent string) *cgroups {
	own, mounts := ownCgroups(), cgroupMounts()
	// Hybrid machines mount v2 too, but the controllers live in v1.
	if root, ok := mounts["cgroup2"]; ok && len(mounts) == 1 {
		return detectV2(root, own[""], parent)
	}
	c := newCgroups(false)
	for _, ctl := range controllers {
		mnt, ok := mounts[ctl]
		if !ok {
			c.missing[ctl] = "is not mounted"
			continue
		}
		dir := filepath.Join(mnt, own[ctl], parent)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			c.missing[ctl] = fmt.Sprintf("is unusable (%v)", err)
			continue
		}
		c.parents[ctl] = dir
	}
	c.summarize()
	return c
}

// summarize sets warning from missing.
func (c *cgroups) summarize() {
	var parts []string
	for _, ctl := range controllers {
		if why, ok := c.missing[ctl]; ok {
			parts = append(parts, ctl+" "+why)
		}
	}
	if len(parts) > 0 {
		c.warning = fmt.Sprintf("cgroup %s controllers unusable, their limits are not enforced: %s", c.version(), strings.Join(parts, "; "))
	}
}

func (c *cgroups) version() string {
	if c.v2 {
		return "v2"
	}
	return "v1"
}

// warnings names each limit in r whose controller c cannot use.
func (c *cgroups) warnings(r limits) []string {
	var out []string
	for _, ctl := range controllers {
		if why, ok := c.missing[ctl]; ok && r.asks(ctl) {
			out = append(out, fmt.Sprintf("resources.%s is not enforced: cgroup %s controller %s %s", ctl, c.version(), ctl, why))
		}
	}
	return out
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
// to the first unified mount.
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
			if _, ok := out["cgroup2"]; !ok {
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
	return out
}

// cgroup is one sandbox's cgroup directories.
type cgroup struct{ dirs []string }

// create makes sandbox id's cgroups and writes the limits of r. Limits
// whose controller is unavailable are returned as warnings.
func (c *cgroups) create(id string, r limits) (*cgroup, []string, error) {
	g := &cgroup{}
	for ctl, parent := range c.parents {
		dir := filepath.Join(parent, id)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			g.destroy()
			return nil, nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		g.dirs = append(g.dirs, dir)
		ctls := []string{ctl}
		if c.v2 {
			ctls = c.enabled
		}
		for _, k := range ctls {
			for file, val := range r.files(k, c.v2) {
				if err := writeCgroupFile(filepath.Join(dir, file), val); err != nil {
					g.destroy()
					return nil, nil, fmt.Errorf("set %s=%s: %w", file, val, err)
				}
			}
		}
	}
	return g, c.warnings(r), nil
}

// add moves pid into every hierarchy of g.
func (g *cgroup) add(pid int) error {
	for _, dir := range g.dirs {
		if err := writeCgroupFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
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

// removeCgroup kills the processes in dir and removes it. cgroup.kill
// (cgroup v2, Linux 5.14+) kills the whole cgroup at once, processes
// forking meanwhile included; elsewhere the listed processes are killed
// until the directory can go.
func removeCgroup(dir string) {
	_ = writeCgroupFile(filepath.Join(dir, "cgroup.kill"), "1")
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

// asks reports whether l limits what controller ctl controls.
func (l limits) asks(ctl string) bool {
	switch ctl {
	case "memory":
		return l.memory > 0
	case "pids":
		return l.pids > 0
	case "cpu":
		return l.cpuMilli > 0
	}
	return false
}

// files returns the control files and values that set l for controller
// ctl, in cgroup v2's or v1's vocabulary.
func (l limits) files(ctl string, v2 bool) map[string]string {
	const period = 100000
	if !l.asks(ctl) {
		return nil
	}
	switch {
	case ctl == "memory" && v2:
		return map[string]string{"memory.max": strconv.FormatInt(l.memory, 10)}
	case ctl == "memory":
		return map[string]string{"memory.limit_in_bytes": strconv.FormatInt(l.memory, 10)}
	case ctl == "pids":
		return map[string]string{"pids.max": strconv.FormatInt(l.pids, 10)}
	case ctl == "cpu" && v2:
		return map[string]string{"cpu.max": fmt.Sprintf("%d %d", l.cpuMilli*period/1000, period)}
	case ctl == "cpu":
		return map[string]string{"cpu.cfs_quota_us": strconv.FormatInt(l.cpuMilli*period/1000, 10)}
	}
	return nil
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
