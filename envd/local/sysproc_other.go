//go:build !linux

package local

import "syscall"

// killWithParent does nothing off Linux, where the jail cannot run anyway.
func killWithParent(*syscall.SysProcAttr) {}
