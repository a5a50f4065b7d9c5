package proxy

import (
	"context"
	"net"
	"net/http"
)

// A stream reaches the client through the server's 4 KiB connection
// buffer, flushed after each write. When the proxy has fallen behind a fast
// stream, one write carries many events, and the server sends it in three
// syscalls: the chunk header with the first 4 KiB, the rest straight from
// the write, and, on the flush, the two bytes (CRLF) that close the chunk.
// Each write runs the kernel's TCP send path (on loopback the receiver's
// too) and wakes the reader.
//
// So while a write of the proxy's is under way, the connection gathers
// what the server writes to it, and if the server wrote anything (the
// write outran its buffer), the proxy flushes the rest, CRLF included,
// into the gathered bytes and sends them in one syscall: the same bytes in
// the same order, one write per burst instead of two or three, at the cost
// of copying a burst once. A write the buffer takes whole goes out on the
// flush, as it would have. [Listener] gives the proxy those connections.

// Listener returns ln with each accepted connection able to gather a
// response's bursts, and sets srv.ConnContext (keeping one already set) so
// that the [Handler] serving through srv finds the connection of a
// request. Serve srv on the returned listener.
func Listener(srv *http.Server, ln net.Listener) net.Listener {
	next := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if next != nil {
			ctx = next(ctx, c)
		}
		if tc, ok := c.(*gatherConn); ok {
			ctx = context.WithValue(ctx, connKey{}, tc)
		}
		return ctx
	}
	return gatherListener{ln}
}

type connKey struct{}

type gatherListener struct{ net.Listener }

func (l gatherListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &gatherConn{Conn: c}, nil
}

// gatherConn gathers its writes while the proxy is writing a response
// through it (see gather), and otherwise writes straight through. Writes
// to it are serialised: they come from the goroutine serving its request,
// or from the ReverseProxy's flush timer under the ReverseProxy's lock.
type gatherConn struct {
	net.Conn
	gathering bool
	buf       *[]byte // what was gathered, from outBufs
}

func (c *gatherConn) Write(p []byte) (int, error) {
	if !c.gathering {
		return c.Conn.Write(p)
	}
	if c.buf == nil {
		c.buf = outBufs.Get().(*[]byte)
	}
	*c.buf = append(*c.buf, p...)
	return len(p), nil
}

// gather makes writes collect until release.
func (c *gatherConn) gather() { c.gathering = true }

// gathered reports whether anything was written since gather.
func (c *gatherConn) gathered() bool { return c.buf != nil }

// release ends gathering and writes what was gathered, in one write.
func (c *gatherConn) release() error {
	c.gathering = false
	b := c.buf
	if b == nil {
		return nil
	}
	c.buf = nil
	_, err := c.Conn.Write(*b)
	if cap(*b) <= maxPooledOut { // a connection holds one only while a write is under way
		*b = (*b)[:0]
		outBufs.Put(b)
	}
	return err
}

// lazyFlusher is the ResponseWriter the ReverseProxy writes a response
// through: a write that outruns the connection's buffer goes out whole in
// one syscall, and the flush after it sends nothing more. Its methods are
// called under the ReverseProxy's flush lock.
type lazyFlusher struct {
	http.ResponseWriter
	conn *gatherConn
	// sent: the last Write left nothing in the server's buffers; it holds
	// until the next Write.
	sent bool
}

// withLazyFlush wraps w when r came on a gatherConn.
func withLazyFlush(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	c, ok := r.Context().Value(connKey{}).(*gatherConn)
	if !ok {
		return w
	}
	return &lazyFlusher{ResponseWriter: w, conn: c}
}

// Write writes p. When the server had to write some of it to the
// connection, the rest is flushed right away and all of it goes out in
// one write.
func (f *lazyFlusher) Write(p []byte) (int, error) {
	f.conn.gather()
	n, err := f.ResponseWriter.Write(p)
	outran := f.conn.gathered()
	if err == nil && outran {
		err = http.NewResponseController(f.ResponseWriter).Flush()
	}
	if rerr := f.conn.release(); err == nil {
		err = rerr
	}
	f.sent = err == nil && outran
	return n, err
}

// FlushError flushes, unless the last Write sent everything already. That
// holds until the next Write: the ReverseProxy's first flush, from a timer
// meant for the headers, can come after a few writes.
func (f *lazyFlusher) FlushError() error {
	if f.sent {
		return nil
	}
	return http.NewResponseController(f.ResponseWriter).Flush()
}

func (f *lazyFlusher) Unwrap() http.ResponseWriter { return f.ResponseWriter }
