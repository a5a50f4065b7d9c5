//go:build !linux

package agent

import "syscall"

// killTree sends SIGKILL to the process group led by pid; without /proc it
// cannot find descendants that left the group.
func killTree(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
