//go:build !unix

package proxy

import (
	"errors"
	"net"
	"syscall"
)

// rawConnOf returns nil: an upstreamConn reads through the connection's
// own Read here.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

func readFD(uintptr, []byte) (int, error) { return 0, errors.ErrUnsupported }
