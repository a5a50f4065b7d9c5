//go:build unix

package proxy

import (
	"net"
	"syscall"
)

// rawConnOf returns c's file descriptor access, or nil.
func rawConnOf(c net.Conn) syscall.RawConn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// readFD reads from a non-blocking socket, again when a signal
// interrupted the read.
func readFD(fd uintptr, b []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), b)
		if err != syscall.EINTR {
			return n, err
		}
	}
}
