//go:build darwin || linux || openbsd

package embedded

import (
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// writeAll writes bufs to f in order. Several go in one writev, so that a
// write of many calls' frames takes neither a system call each nor a copy
// into one buffer (a rollout's first turns, ending together, make writes
// of hundreds of calls).
func writeAll(f *os.File, bufs [][]byte) error {
	if len(bufs) == 1 {
		_, err := f.Write(bufs[0])
		return err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	bufs = slices.Clone(bufs) // writev cuts off what it wrote
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		werr = writev(int(fd), bufs)
		return true
	}); err != nil {
		return err
	}
	return werr
}

// maxIovecs is the most buffers one writev takes (IOV_MAX).
const maxIovecs = 1024

// writev writes all of bufs to fd, again after a short write or a signal.
func writev(fd int, bufs [][]byte) error {
	for {
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
		if len(bufs) == 0 {
			return nil
		}
		n, err := unix.Writev(fd, bufs[:min(len(bufs), maxIovecs)])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return os.NewSyscallError("writev", err)
		case n == 0:
			return io.ErrShortWrite
		}
		bufs = advance(bufs, n)
	}
}

// advance cuts the first n bytes off bufs, which hold at least n.
func advance(bufs [][]byte, n int) [][]byte {
	for n > 0 {
		k := min(n, len(bufs[0]))
		bufs[0], n = bufs[0][k:], n-k
		if len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
	}
	return bufs
}
