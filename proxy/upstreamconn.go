package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// upstreamReadBuffer is the most an upstream connection reads from its
// socket at once, and the size of the ReverseProxy's copy buffers, which
// the stripper reads into. When the proxy falls behind a fast stream, one
// read takes every event already received, and one write hands them to
// the client: reading 4 KiB at a time (about ten 400-byte events with
// logprobs), a backlog cost a read syscall, and a write, per few events;
// 32 KiB cut the proxy's CPU per request by 2-11% (docs/benchmarks.md).
const upstreamReadBuffer = 32 << 10

// copyBufs holds the buffers of upstreamReadBuffer bytes: the
// ReverseProxy's copy buffers, an upstream connection's unread bytes, and
// the buffer a request body is written through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, upstreamReadBuffer); return &b }}

// bufferPool recycles the ReverseProxy's copy buffers.
type bufferPool struct{}

func (bufferPool) Get() []byte  { return *copyBufs.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBufs.Put(&b) }

// dialUpstream dials an upstream connection as the Transport's default
// dialer does and wraps it in an upstreamConn.
func dialUpstream(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	uc := &upstreamConn{Conn: c, w: onlyWriter{c}, raw: rawConnOf(c)}
	uc.readFn = uc.readSocket
	return uc, nil
}

// upstreamConn is an upstream connection that holds a big buffer only
// while it has bytes in it.
//
// The Transport reads a connection through a buffer of its own, held for
// the connection's life; one of upstreamReadBuffer bytes for each open
// stream made most of the proxy's memory at hundreds of streams, though
// most of them wait for the upstream at any moment. So the Transport's
// buffer is small, and an upstreamConn reads the socket only once it is
// readable, into a pooled buffer of upstreamReadBuffer bytes that it hands
// out in the pieces asked for and gives back once they are all read. A read
// of a chunked body still returns what one socket read took: the HTTP
// reader refills its buffer while the chunk it reads goes on, and those
// refills take the held bytes without a system call. It stops short only
// where its buffer ends exactly between two chunks.
//
// It also copies a request body onto the socket through a pooled buffer:
// the Transport writes a request through a 4 KiB buffer and hands what of
// the body does not fit to the connection's ReadFrom, and a TCP
// connection's own ReadFrom allocates a buffer the size of that rest for
// every request.
//
// Only the Transport's read loop, and while a response body is read the
// goroutine reading it, call Read; never both at once.
type upstreamConn struct {
	net.Conn
	w   io.Writer       // the connection as an onlyWriter, made once
	raw syscall.RawConn // nil where the connection has none: Read is the connection's

	unread *[]byte // pooled buffer holding bytes read from the socket and not yet handed out
	off    int     // (*unread)[off:end] is what is left
	end    int

	// readFn is readSocket, bound once: a closure made for each read, with
	// the results it set, was 14% of the proxy's allocations at 8
	// token streams. n and err are what it read.
	readFn func(fd uintptr) bool
	n      int
	err    error
}

// Read hands out the bytes already read from the socket, or when there
// are none reads the socket, waiting for it without holding a buffer.
func (c *upstreamConn) Read(p []byte) (int, error) {
	if c.unread == nil {
		if c.raw == nil || len(p) == 0 || len(p) >= upstreamReadBuffer {
			return c.Conn.Read(p)
		}
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, (*c.unread)[c.off:c.end])
	if c.off += n; c.off == c.end {
		copyBufs.Put(c.unread)
		c.unread = nil
	}
	return n, nil
}

// fill waits until the socket is readable and reads what it has, up to
// upstreamReadBuffer bytes, into a pooled buffer.
func (c *upstreamConn) fill() error {
	err := c.raw.Read(c.readFn)
	n, rerr := c.n, c.err
	c.err = nil
	switch {
	case err != nil: // closed, or past a deadline
		return err
	case rerr != nil:
		return &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(),
			Err: os.NewSyscallError("read", rerr)}
	case n == 0:
		return io.EOF
	}
	return nil
}

// readSocket is fill's read of the socket: it reports false, holding
// nothing, when the socket has nothing yet.
func (c *upstreamConn) readSocket(fd uintptr) bool {
	bp := copyBufs.Get().(*[]byte)
	c.n, c.err = readFD(fd, *bp)
	if c.err == syscall.EAGAIN {
		copyBufs.Put(bp)
		return false
	}
	if c.n > 0 {
		c.unread, c.off, c.end = bp, 0, c.n
	} else {
		copyBufs.Put(bp)
	}
	return true
}

func (c *upstreamConn) ReadFrom(r io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	n, err := io.CopyBuffer(c.w, r, *bp)
	copyBufs.Put(bp)
	return n, err
}

// CloseWrite half-closes the connection, as the reverse proxy does to an
// upgraded (switched-protocol) connection once the client has sent all.
func (c *upstreamConn) CloseWrite() error {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return errors.ErrUnsupported
	}
	return cw.CloseWrite()
}

// onlyWriter hides a writer's ReadFrom, so that io.CopyBuffer uses the
// buffer it is given.
type onlyWriter struct{ io.Writer }
