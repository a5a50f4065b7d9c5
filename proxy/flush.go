package proxy

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"unsafe"
)

// A stream reaches the client through the server's 4 KiB connection
// buffer, flushed after each write. When the proxy has fallen behind a fast
// stream, one write carries many events, and the server sends it in three
// syscalls: the chunk header with the first 4 KiB, the rest straight from
// the write, and, on the flush, the two bytes (CRLF) that close the chunk.
// Those two bytes carry no data: a client has every byte of the chunk
// without them (Go's, Python's http.client and h11, and llhttp all hand
// the chunk's data over before its CRLF arrives). So when they are all the
// flush would send, the proxy leaves them in the buffer, where the next
// chunk or the end of the response takes them along: a third fewer write
// syscalls for such bursts, and the same bytes in the same order.
//
// The proxy knows they are all the buffer holds when the last byte of its
// write went to the socket straight from the write's own bytes: the
// server's buffers write only when they are empty straight from the
// caller's bytes, and hand bytes on in order, so everything before that
// byte has gone out, and all that follows it is the CRLF the server adds
// after a chunk (nothing, unchunked). [Listener] lets it see that: each
// connection remembers where its last write ended. Where the proxy cannot
// tell (no such connection, a write the server buffered or framed into
// its own bytes), it flushes.

// Listener returns ln with each accepted connection remembering where its
// last write ended, and sets srv.ConnContext (keeping one already set) so
// that the [Handler] serving through srv finds the connection of a
// request. Serve srv on the returned listener.
func Listener(srv *http.Server, ln net.Listener) net.Listener {
	next := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if next != nil {
			ctx = next(ctx, c)
		}
		if tc, ok := c.(*tailConn); ok {
			ctx = context.WithValue(ctx, connKey{}, tc)
		}
		return ctx
	}
	return tailListener{ln}
}

type connKey struct{}

type tailListener struct{ net.Listener }

func (l tailListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tailConn{Conn: c}, nil
}

// tailConn remembers the address of the last byte written to it, as a
// number: it must not keep the writer's buffer (a large response's, say)
// alive while the connection idles.
type tailConn struct {
	net.Conn
	last atomic.Uintptr
}

func (c *tailConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.last.Store(addrOf(&p[n-1]))
	}
	return n, err
}

func addrOf(b *byte) uintptr { return uintptr(unsafe.Pointer(b)) }

// lazyFlusher is the ResponseWriter the ReverseProxy writes a response
// through: it skips a flush that would send only a chunk's closing CRLF.
// Its methods are called under the ReverseProxy's flush lock.
type lazyFlusher struct {
	http.ResponseWriter
	conn *tailConn
	// sent: the last Write's bytes went out, the last one straight from
	// the write: only a CRLF, if anything, is left in the buffer until the
	// next Write.
	sent bool
}

// withLazyFlush wraps w when r came on a tailConn.
func withLazyFlush(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	c, ok := r.Context().Value(connKey{}).(*tailConn)
	if !ok {
		return w
	}
	return &lazyFlusher{ResponseWriter: w, conn: c}
}

// Write writes p and notes whether its last byte went out straight from p.
// p is alive throughout, so no other buffer can be at that address.
func (f *lazyFlusher) Write(p []byte) (int, error) {
	f.conn.last.Store(0) // a match below is a write of this call
	n, err := f.ResponseWriter.Write(p)
	f.sent = err == nil && n == len(p) && n > 0 && f.conn.last.Load() == addrOf(&p[n-1])
	return n, err
}

// FlushError flushes, unless the last Write left at most its chunk's
// closing CRLF in the buffer. That holds until the next Write: the
// ReverseProxy's first flush, from a timer meant for the headers, can come
// after a few writes.
func (f *lazyFlusher) FlushError() error {
	if f.sent {
		return nil
	}
	return http.NewResponseController(f.ResponseWriter).Flush()
}

func (f *lazyFlusher) Unwrap() http.ResponseWriter { return f.ResponseWriter }
