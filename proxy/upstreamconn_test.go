package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestUpstreamConnReadFrom checks that an upstream connection writes a
// request body's bytes exactly, and through the pooled buffer: a TCP
// connection's own ReadFrom allocates a buffer for each body.
func TestUpstreamConnReadFrom(t *testing.T) {
	c, peer := upstreamPair(t)

	body := make([]byte, 70<<10) // more than two copy buffers
	for i := range body {
		body[i] = byte(rand.IntN(256))
	}
	got := make([]byte, len(body))
	next, read := make(chan struct{}), make(chan error)
	go func() {
		for range next {
			_, err := io.ReadFull(peer, got)
			read <- err
		}
	}()
	defer close(next)
	rf, ok := c.(io.ReaderFrom)
	if !ok {
		t.Fatalf("upstream connection %T has no ReadFrom", c)
	}
	br := bytes.NewReader(body)
	lr := &io.LimitedReader{R: br} // as the Transport hands a body over
	send := func() {
		next <- struct{}{}
		br.Reset(body)
		lr.N = int64(len(body))
		if n, err := rf.ReadFrom(lr); err != nil || n != int64(len(body)) {
			t.Fatalf("ReadFrom = %d, %v; want %d, nil", n, err, len(body))
		}
		if err := <-read; err != nil {
			t.Fatal(err)
		}
	}
	send()
	if !bytes.Equal(got, body) {
		t.Fatal("the peer read other bytes than the body")
	}
	// Bytes, not a count of allocations: the race detector's sync.Pool
	// drops a quarter of what is put back, and other goroutines of the
	// test binary allocate too. A buffer per body would be 70 KiB a run.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 20
	for range runs {
		send()
	}
	runtime.ReadMemStats(&after)
	if perRun := (after.TotalAlloc - before.TotalAlloc) / runs; perRun >= uint64(len(body))/2 {
		t.Fatalf("ReadFrom allocated %d bytes per %d-byte body; want far less (the pooled buffer)", perRun, len(body))
	}
}

// TestUpstreamConnCloseWrite checks that an upstream connection still
// half-closes, as the reverse proxy asks of an upgraded connection: the
// peer reads the end of the stream and can still answer.
func TestUpstreamConnCloseWrite(t *testing.T) {
	c, peer := upstreamPair(t)
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		t.Fatalf("upstream connection %T has no CloseWrite", c)
	}
	if _, err := c.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(peer)
	if err != nil || string(got) != "last words" {
		t.Fatalf("peer read %q, %v; want the bytes, then the end of the stream", got, err)
	}
	if _, err := peer.Write([]byte("reply")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "reply" {
		t.Fatalf("read %q, %v after the half-close; want the peer's reply", buf, err)
	}
}

// upstreamPair dials an upstream connection to a loopback listener and
// returns it with the listener's end.
func upstreamPair(t *testing.T) (c, peer net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err = dialUpstream(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	peer, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	return c, peer
}

// TestTransportHTTP2 checks that the upstream Transport, with its own
// dialer, still speaks HTTP/2 to a TLS upstream that offers it (Go turns
// HTTP/2 off by default for a Transport with a custom dialer) and HTTP/1.1
// to a cleartext one and to a TLS one that offers nothing else; and that a
// streamed body of each comes through byte for byte.
func TestTransportHTTP2(t *testing.T) {
	stream := make([]byte, 300<<10)
	for i := range stream {
		stream[i] = byte(i * 7 / 3)
	}
	proto := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto+"\n")
		for rest := stream; len(rest) > 0; rest = rest[min(len(rest), 1000):] {
			w.Write(rest[:min(len(rest), 1000)])
			w.(http.Flusher).Flush()
		}
	})
	h2Up := httptest.NewUnstartedServer(proto)
	h2Up.EnableHTTP2 = true
	h2Up.StartTLS()
	defer h2Up.Close()
	tlsUp := httptest.NewTLSServer(proto)
	defer tlsUp.Close()
	plainUp := httptest.NewServer(proto)
	defer plainUp.Close()

	tr := newTransport()
	tr.TLSClientConfig = h2Up.Client().Transport.(*http.Transport).TLSClientConfig.Clone() // trust the test certificate
	defer tr.CloseIdleConnections()
	for url, want := range map[string]string{h2Up.URL: "HTTP/2.0", tlsUp.URL: "HTTP/1.1", plainUp.URL: "HTTP/1.1"} {
		res, err := (&http.Client{Transport: tr}).Get(url)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || !bytes.Equal(got, append([]byte(want+"\n"), stream...)) {
			t.Fatalf("%s: got %d bytes, %v; want %s and the %d-byte stream", url, len(got), err, want, len(stream))
		}
	}
}

// TestUpstreamConnRead checks that an upstream connection's reads return
// the peer's bytes exactly, in order, to the end of the stream, whatever
// the sizes written and read (below, at and above upstreamReadBuffer,
// where a read goes to the socket directly), and that it holds no buffer
// once all it read is handed out.
func TestUpstreamConnRead(t *testing.T) {
	c, peer := upstreamPair(t)
	rng := rand.New(rand.NewPCG(1, 2))
	want := make([]byte, 3<<20)
	for i := range want {
		want[i] = byte(rng.IntN(256))
	}
	go func() {
		for rest := want; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(70<<10))
			if _, err := peer.Write(rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
		}
		peer.Close()
	}()
	uc := c.(*upstreamConn)
	got := make([]byte, 0, len(want))
	sizes := []int{1, 7, 100, 4 << 10, upstreamReadBuffer - 1, upstreamReadBuffer, upstreamReadBuffer + 1, 80 << 10}
	for i := 0; ; i++ {
		p := make([]byte, sizes[i%len(sizes)])
		n, err := c.Read(p)
		got = append(got, p[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read %d after %d bytes: %v", i, len(got), err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes that differ from the %d written", len(got), len(want))
	}
	if uc.unread != nil {
		t.Fatal("the connection holds a buffer after the end of the stream")
	}
}

// TestUpstreamConnReadWaits checks that an empty read returns at once;
// that a read waiting for the peer ends at the connection's deadline with
// a timeout, holding no buffer, and that the connection reads on
// afterwards; and that closing the connection ends a waiting read.
func TestUpstreamConnReadWaits(t *testing.T) {
	c, peer := upstreamPair(t)
	uc := c.(*upstreamConn)
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // so that a read that waits fails rather than hangs
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("an empty read = %d, %v; want 0, nil at once", n, err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	p := make([]byte, 100)
	n, err := c.Read(p)
	var ne net.Error
	if n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past the deadline = %d, %v; want 0 and a timeout", n, err)
	}
	if uc.unread != nil {
		t.Fatal("a read that waited and timed out holds a buffer")
	}
	c.SetReadDeadline(time.Time{})
	if _, err := peer.Write([]byte("after the timeout")); err != nil {
		t.Fatal(err)
	}
	if n, err := io.ReadFull(c, p[:17]); err != nil || string(p[:n]) != "after the timeout" {
		t.Fatalf("read %q, %v after the deadline was lifted", p[:n], err)
	}

	done := make(chan error)
	go func() {
		_, err := c.Read(p)
		done <- err
	}()
	c.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a read waiting while the connection closed returned %v; want %v", err, net.ErrClosed)
	}
}

// TestUpstreamConnWaitHoldsNoBuffer checks that reads waiting for their
// sockets hold no buffer of their own: with 64 of them waiting (each seen
// in the poller's wait in its stack), the heap holds far less than the
// 64 × 32 KiB a read buffer each would take.
func TestUpstreamConnWaitHoldsNoBuffer(t *testing.T) {
	const n = 64
	conns := make([]net.Conn, n)
	bufs := make([][]byte, n)
	for i := range conns {
		conns[i], _ = upstreamPair(t)
		conns[i].SetReadDeadline(time.Now().Add(time.Minute)) // a read that never waits fails, not hangs
		bufs[i] = make([]byte, 4<<10)                         // as the Transport's reader asks
	}
	base := liveHeap()
	done := make(chan error, n)
	for i := range conns {
		go func() {
			_, err := conns[i].Read(bufs[i])
			done <- err
		}()
	}
	waitInPoller(t, n)
	if held := int64(liveHeap()) - int64(base); held >= n*upstreamReadBuffer/4 {
		t.Fatalf("%d waiting reads hold %d bytes of heap; want far less than a %d-byte buffer each", n, held, upstreamReadBuffer)
	}
	for _, c := range conns {
		c.Close()
	}
	for range conns {
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("a waiting read ended with %v; want %v once its connection closed", err, net.ErrClosed)
		}
	}
}

// liveHeap returns the heap's live bytes once two collections have also
// emptied the buffer pools.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// waitInPoller waits until n goroutines of the calling test wait in the
// network poller for a socket to become readable, or fails after ten
// seconds.
func waitInPoller(t *testing.T, n int) {
	t.Helper()
	buf := make([]byte, 8<<20)
	for end := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		waiting := 0
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "waitRead") && strings.Contains(g, t.Name()+".func") {
				waiting++
			}
		}
		if waiting >= n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d of %d reads wait in the poller after ten seconds", waiting, n)
		}
	}
}

// TestUpstreamConnReadAllocs: a read of bytes waiting on the socket
// allocates nothing (a closure made for each socket read, with the results
// it set, cost two or three allocations a read).
func TestUpstreamConnReadAllocs(t *testing.T) {
	c, peer := upstreamPair(t)
	msg, buf := []byte("data: {\"id\":1}\n\n"), make([]byte, 64)
	round := func() {
		if _, err := peer.Write(msg); err != nil {
			t.Fatal(err)
		}
		if n, err := io.ReadFull(c, buf[:len(msg)]); err != nil || n != len(msg) {
			t.Fatalf("read %d bytes, %v; want %d", n, err, len(msg))
		}
	}
	round() // the pool's first buffer
	if allocs := testing.AllocsPerRun(200, round); allocs > 0 {
		t.Errorf("a write and a read of %d bytes allocated %.1f times", len(msg), allocs)
	}
}
