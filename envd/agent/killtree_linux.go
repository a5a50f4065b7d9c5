package agent

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killTree sends SIGKILL to the process group led by pid and to every
// descendant of pid, including those that moved to a session or group of
// their own (setsid), so a timeout leaves no grandchild running. It first
// stops the tree with SIGSTOP, rescanning until no new descendant shows up,
// so that nothing forks or is reparented away while it is being killed.
func killTree(pid int) {
	seen := map[int]bool{pid: true}
	_ = syscall.Kill(-pid, syscall.SIGSTOP)
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	for range 16 {
		grew := false
		for _, p := range descendants(pid) {
			if !seen[p] {
				seen[p], grew = true, true
				_ = syscall.Kill(p, syscall.SIGSTOP)
			}
		}
		if !grew {
			break
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for p := range seen {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	// SIGKILL is delivered when the target next runs; wait (bounded) until
	// every process is dead or a zombie, so that an exec that reports a
	// timeout has no process of it left running.
	for wait := 100 * time.Microsecond; wait < 4*time.Second; wait *= 2 {
		left := false
		for p := range seen {
			if _, state, ok := statOf(p); ok && state != 'Z' && state != 'X' {
				left = true
				break
			}
		}
		if !left {
			return
		}
		time.Sleep(wait)
	}
}

// descendants lists the live (non-zombie) descendants of root from /proc.
func descendants(root int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, state, ok := statOf(pid)
		if ok && state != 'Z' {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// statOf reads the parent pid and state letter of pid from /proc/PID/stat.
func statOf(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name may contain spaces and parens; fields resume after
	// the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err == nil
}
