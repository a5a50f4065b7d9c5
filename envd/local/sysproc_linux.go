package local

import "syscall"

// killWithParent has the kernel kill the process when envd dies.
func killWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
