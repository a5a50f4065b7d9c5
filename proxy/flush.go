package proxy

import (
	"context"
	"math/bits"
	"net"
	"net/http"
	"sync/atomic"
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
// The proxy knows they are all the buffer holds by counting what the
// connection took during the write: [Listener] counts it. Where it cannot
// tell (no count, an HTTP/1.0 client, a write the server buffered whole, a
// response whose headers are still in the buffer), it flushes.

// Listener returns ln with each accepted connection counting the bytes the
// server writes to it, and sets srv.ConnContext (keeping one already set)
// so that the [Handler] serving through srv finds the count of a request's
// connection. Serve srv on the returned listener.
func Listener(srv *http.Server, ln net.Listener) net.Listener {
	next := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if next != nil {
			ctx = next(ctx, c)
		}
		if cc, ok := c.(*countingConn); ok {
			ctx = context.WithValue(ctx, connKey{}, cc)
		}
		return ctx
	}
	return countingListener{ln}
}

type connKey struct{}

type countingListener struct{ net.Listener }

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c}, nil
}

// countingConn counts the bytes written to it.
type countingConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// bufState is what the connection's write buffer holds, as far as a
// lazyFlusher knows.
type bufState uint8

const (
	bufUnknown bufState = iota // anything: nothing flushed yet, or a flush failed
	bufEmpty                   // nothing: the last flush sent it all
	bufCRLF                    // only the CRLF that closes the last chunk
)

// lazyFlusher is the ResponseWriter the ReverseProxy writes a response
// through: it skips a flush that would send only a chunk's closing CRLF.
// Its methods are called under the ReverseProxy's flush lock.
type lazyFlusher struct {
	http.ResponseWriter
	conn   *countingConn
	state  bufState
	writes int   // Write calls since the last flush
	n      int   // bytes of the last Write
	took   int64 // bytes the connection took during it
}

// withLazyFlush wraps w when r's connection is counted.
func withLazyFlush(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	c, ok := r.Context().Value(connKey{}).(*countingConn)
	if !ok || r.ProtoMajor != 1 || r.ProtoMinor < 1 {
		return w
	}
	return &lazyFlusher{ResponseWriter: w, conn: c}
}

func (f *lazyFlusher) Write(p []byte) (int, error) {
	before := f.conn.written.Load()
	n, err := f.ResponseWriter.Write(p)
	f.writes++
	f.n, f.took = n, f.conn.written.Load()-before
	return n, err
}

// FlushError flushes, unless all the buffer holds is the CRLF that closes
// the chunk just written.
func (f *lazyFlusher) FlushError() error {
	if f.onlyCRLF() {
		f.state, f.writes = bufCRLF, 0
		return nil
	}
	f.writes = 0
	err := http.NewResponseController(f.ResponseWriter).Flush()
	f.state = bufEmpty
	if err != nil {
		f.state = bufUnknown
	}
	return err
}

func (f *lazyFlusher) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// onlyCRLF reports whether the last flush left the buffer empty or holding
// a CRLF, one Write came since, and the connection took everything that
// write put in the buffer but its chunk's closing CRLF. Everything else
// (the write buffered whole, or sent unchunked) fails the count.
func (f *lazyFlusher) onlyCRLF() bool {
	if f.writes != 1 || f.n == 0 {
		return false
	}
	var held int64
	switch f.state {
	case bufEmpty:
	case bufCRLF:
		held = 2
	default:
		return false
	}
	return f.took == held+chunkHeaderLen(f.n)+int64(f.n)
}

// chunkHeaderLen is the length of the header of an n-byte chunk: n in hex
// and CRLF.
func chunkHeaderLen(n int) int64 { return int64((bits.Len(uint(n))+3)/4 + 2) }
