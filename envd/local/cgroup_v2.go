package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// detectV2 prepares parent under envd's own cgroup (own, relative to the
// unified hierarchy mounted at root) and enables in it each of the memory,
// pids and cpu controllers that envd's cgroup is offered.
func detectV2(root, own, parent string) *cgroups {
	c := newCgroups(true)
	base := filepath.Join(root, own)
	dir := filepath.Join(base, parent)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		for _, ctl := range controllers {
			c.missing[ctl] = fmt.Sprintf("is unusable: the cgroup v2 hierarchy is not writable (%v)", err)
		}
		c.summarize()
		return c
	}
	c.parents[""] = dir
	offered := words(filepath.Join(base, "cgroup.controllers"))
	for _, ctl := range controllers {
		if !offered[ctl] {
			c.missing[ctl] = fmt.Sprintf("is not in %s (it is bound to a cgroup v1 hierarchy or not delegated to envd's cgroup)",
				filepath.Join(base, "cgroup.controllers"))
			continue
		}
		// The parent is a fresh, empty cgroup; base must enable the
		// controller for it first, which cgroup v2 refuses when base
		// (not the root) has processes of its own.
		if err := enableController(base, ctl); err != nil {
			c.missing[ctl] = "cannot be enabled: " + err.Error()
			continue
		}
		if err := enableController(dir, ctl); err != nil {
			c.missing[ctl] = "cannot be enabled: " + err.Error()
			continue
		}
		c.enabled = append(c.enabled, ctl)
	}
	c.summarize()
	return c
}

// enableController adds ctl to dir's cgroup.subtree_control unless it is
// there already.
func enableController(dir, ctl string) error {
	if words(filepath.Join(dir, "cgroup.subtree_control"))[ctl] {
		return nil
	}
	err := writeCgroupFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+ctl)
	if errors.Is(err, syscall.EBUSY) {
		return fmt.Errorf("%s has processes of its own and cgroup v2 delegates controllers only from cgroups without them "+
			"(run envd in a cgroup of its own: systemd Delegate=yes, or a container whose processes sit in a leaf cgroup): %w", dir, err)
	}
	return err
}

// words reads the space-separated words of a cgroup file as a set; a
// file that cannot be read is empty.
func words(path string) map[string]bool {
	b, _ := os.ReadFile(path)
	out := map[string]bool{}
	for _, w := range strings.Fields(string(b)) {
		out[w] = true
	}
	return out
}

// writeCgroupFile writes val to an existing control file (never creating
// one: cgroupfs has only the files the kernel made).
func writeCgroupFile(path, val string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(val))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
