package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// flushSteps are the writes of the test stream: bursts past the
// connection's 4 KiB buffer, which go out in one write each, and a small
// write, which the server buffers whole and which is flushed as usual.
var flushSteps = []int{9000, 100, 9000, 9000, 20000}

// recordingConn keeps the bytes of each Write, under the counting layer.
type recordingConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, bytes.Clone(p))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *recordingConn) take() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.writes
	c.writes = nil
	return w
}

type recordingListener struct {
	net.Listener
	conns chan *recordingConn
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &recordingConn{Conn: c}
	l.conns <- rc
	return rc, nil
}

// flushServer serves one stream: the headers, then each of steps when
// the test sends on next, each write flushed as the ReverseProxy does, and
// the end of the stream at one more send.
func flushServer(t testing.TB, steps []int) (url string, next chan<- struct{}, conns <-chan *recordingConn) {
	return flushServerWith(t, steps, true)
}

// flushServerWith is flushServer, flushing the headers before the first
// step or not.
func flushServerWith(t testing.TB, steps []int, headersFirst bool) (url string, next chan<- struct{}, conns <-chan *recordingConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stepped := make(chan struct{})
	accepted := make(chan *recordingConn, 4)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w = withLazyFlush(w, r)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		if headersFirst {
			if err := rc.Flush(); err != nil {
				t.Error(err)
				return
			}
		}
		for i, n := range steps {
			select {
			case <-stepped:
			case <-r.Context().Done():
				return
			}
			w.Write(bytes.Repeat([]byte{'a' + byte(i)}, n))
			// The second flush stands for the ReverseProxy's timer flush,
			// which can come after a write's: it sends nothing either.
			for range 2 {
				if err := rc.Flush(); err != nil {
					t.Error(err)
					return
				}
			}
		}
		select {
		case <-stepped:
		case <-r.Context().Done():
		}
	})}
	go srv.Serve(Listener(srv, recordingListener{ln, accepted}))
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/", stepped, accepted
}

// TestGatherConnKeepsNoBuffer: between writes a connection holds no
// buffer, neither the one a write came from (a large response's, on a
// connection then idle) nor the one it gathered into.
func TestGatherConnKeepsNoBuffer(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go io.Copy(io.Discard, b)
	c := &gatherConn{Conn: a}
	collected := make(chan struct{})
	func() {
		buf := make([]byte, 1<<20)
		runtime.AddCleanup(&buf[0], func(ch chan struct{}) { close(ch) }, collected)
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
		c.gather()
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
		if err := c.release(); err != nil {
			t.Fatal(err)
		}
	}()
	if c.buf != nil {
		t.Fatal("the connection kept its gathered buffer after release")
	}
	runtime.GC()
	select {
	case <-collected:
	case <-time.After(30 * time.Second):
		t.Fatal("the written buffer is still reachable after a collection")
	}
	runtime.KeepAlive(c) // the connection lives on, idle
}

// TestLazyFlushHTTP10: to an HTTP/1.0 client the stream goes unchunked,
// each step arrives whole, and the bytes are the writes'.
func TestLazyFlushHTTP10(t *testing.T) {
	url, next, _ := flushServer(t, flushSteps)
	br := rawGet(t, url, "HTTP/1.0", 30*time.Second)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.TransferEncoding) != 0 {
		t.Fatalf("transfer encoding %q, want none", resp.TransferEncoding)
	}
	for i, n := range flushSteps {
		next <- struct{}{}
		got := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, got); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if string(got) != strings.Repeat(string('a'+byte(i)), n) {
			t.Fatalf("step %d: wrong bytes", i)
		}
	}
	next <- struct{}{}
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) > 0 {
		t.Fatalf("after the last step: %d bytes, %v", len(rest), err)
	}
}

// rawGet sends a GET for url in protocol proto on a new connection and
// returns a reader of what comes back; a read past timeout fails (a
// held-back write) instead of hanging.
func rawGet(t testing.TB, url, proto string, timeout time.Duration) *bufio.Reader {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(timeout))
	fmt.Fprintf(c, "GET / %s\r\nHost: x\r\nConnection: close\r\n\r\n", proto)
	return bufio.NewReader(c)
}

func chunk(n int, b byte) string {
	return strconv.FormatInt(int64(n), 16) + "\r\n" + strings.Repeat(string(b), n)
}

// TestLazyFlushWrites reads the stream off the socket: each burst arrives
// whole with its closing CRLF, and the connection sees exactly the writes
// it should: one per burst, where the server alone makes two and a flush;
// a small write, which the server buffers whole, goes out on the flush.
func TestLazyFlushWrites(t *testing.T) {
	url, next, conns := flushServer(t, flushSteps)
	br := rawGet(t, url, "HTTP/1.1", 30*time.Second)
	resp, err := http.ReadResponse(br, nil) // reads the headers only
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.TransferEncoding, []string{"chunked"}) {
		t.Fatalf("transfer encoding %q, want chunked", resp.TransferEncoding)
	}
	rc := <-conns
	rc.take() // the headers
	want := []struct {
		got    string
		writes []int
	}{
		{chunk(9000, 'a') + "\r\n", []int{9008}},
		{chunk(100, 'b') + "\r\n", []int{106}},
		{chunk(9000, 'c') + "\r\n", []int{9008}},
		{chunk(9000, 'd') + "\r\n", []int{9008}},
		{chunk(20000, 'e') + "\r\n", []int{20008}},
	}
	for i, w := range want {
		next <- struct{}{}
		got := make([]byte, len(w.got))
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if string(got) != w.got {
			t.Fatalf("step %d: got %q..., want %q...", i, got[:16], w.got[:16])
		}
		if sizes := writeSizes(rc.take()); !slices.Equal(sizes, w.writes) {
			t.Errorf("step %d: the connection took writes of %v bytes, want %v", i, sizes, w.writes)
		}
	}
	next <- struct{}{}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if string(rest) != "0\r\n\r\n" {
		t.Fatalf("the end of the stream: %q, want the last chunk", rest)
	}
	if sizes := writeSizes(rc.take()); !slices.Equal(sizes, []int{5}) {
		t.Errorf("the end took writes of %v bytes, want one of 5", sizes)
	}
}

// TestLazyFlushFirstBurst: a burst that goes out with the response's
// headers (no flush before it) goes in one write with them.
func TestLazyFlushFirstBurst(t *testing.T) {
	url, next, conns := flushServerWith(t, []int{9000, 9000}, false)
	br := rawGet(t, url, "HTTP/1.1", 30*time.Second)
	next <- struct{}{}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := <-conns
	got := make([]byte, 9000)
	if _, err := io.ReadFull(resp.Body, got); err != nil {
		t.Fatal(err)
	}
	ws := rc.take()
	if len(ws) != 1 || !bytes.HasPrefix(ws[0], []byte("HTTP/1.1 200")) || !bytes.HasSuffix(ws[0], append(got[len(got)-16:], "\r\n"...)) {
		t.Fatalf("the headers and the first burst took writes of %v bytes, want one", writeSizes(ws))
	}
	next <- struct{}{}
	if _, err := io.ReadFull(resp.Body, got); err != nil {
		t.Fatal(err)
	}
	if sizes := writeSizes(rc.take()); !slices.Equal(sizes, []int{9008}) {
		t.Errorf("the second burst took writes of %v bytes, want [9008]", sizes)
	}
	next <- struct{}{}
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) > 0 {
		t.Fatalf("after the last burst: %d bytes, %v", len(rest), err)
	}
}

// TestGatherConnWriteError: a gathered burst that the connection refuses
// fails the proxy's write, which stops the response.
func TestGatherConnWriteError(t *testing.T) {
	a, b := net.Pipe()
	b.Close()
	c := &gatherConn{Conn: a}
	c.gather()
	if n, err := c.Write(make([]byte, 100)); n != 100 || err != nil {
		t.Fatalf("a gathered write: %d, %v; want 100, nil", n, err)
	}
	if err := c.release(); err == nil {
		t.Fatal("release to a closed connection reported no error")
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Fatal("a write after release was gathered, not written")
	}
}

func writeSizes(ws [][]byte) []int {
	var n []int
	for _, w := range ws {
		n = append(n, len(w))
	}
	return n
}

// flushClients read the stream through real HTTP clients, printing the
// bytes they have after each read; a client that waited for a chunk's
// CRLF before handing its data over would never reach a step's total.
var flushClients = map[string][]string{
	"python3": {"-c", `
import http.client, sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
c = http.client.HTTPConnection(u.hostname, u.port)
c.request("GET", "/")
r = c.getresponse()
n = 0
while True:
    b = r.read1(65536)
    if not b:
        break
    n += len(b)
    print(n, flush=True)
`},
	"node": {"-e", `
require("http").get(process.argv[1], res => {
  let n = 0;
  res.on("data", b => { n += b.length; console.log(n); });
  res.on("end", () => process.exit(0));
});
`},
}

// TestLazyFlushClients: Go's client, Python's http.client and Node's
// (llhttp) get every burst as it is written.
func TestLazyFlushClients(t *testing.T) {
	t.Run("go", func(t *testing.T) {
		url, next, _ := flushServer(t, flushSteps)
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		for i, n := range flushSteps {
			next <- struct{}{}
			got := make([]byte, n)
			if _, err := io.ReadFull(resp.Body, got); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		next <- struct{}{}
	})
	for name, args := range flushClients {
		t.Run(name, func(t *testing.T) {
			bin, err := exec.LookPath(name)
			if err != nil {
				t.Skipf("%s is not installed", name)
			}
			url, next, _ := flushServer(t, flushSteps)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append(args, url)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			lines := bufio.NewScanner(out)
			total := 0
			for i, n := range flushSteps {
				next <- struct{}{}
				total += n
				if !readUpTo(lines, total) {
					t.Fatalf("step %d: %s never had %d bytes (stderr: %s)", i, name, total, stderr.String())
				}
			}
			next <- struct{}{}
		})
	}
}

// readUpTo reads the client's running totals until one reaches want.
func readUpTo(lines *bufio.Scanner, want int) bool {
	for lines.Scan() {
		n, err := strconv.Atoi(strings.TrimSpace(lines.Text()))
		if err != nil || n > want {
			return false
		}
		if n == want {
			return true
		}
	}
	return false
}

// FuzzLazyFlush streams writes of the sizes the fuzzer picks, each flushed
// as the ReverseProxy does, and reads them off a raw socket: every write's
// bytes arrive before the next write is made, and the connection carries
// exactly the chunked encoding of the writes.
func FuzzLazyFlush(f *testing.F) {
	f.Add([]byte{0x23, 0x28, 0, 100, 0x23, 0x28, 0x23, 0x28, 0x4e, 0x20}, true)
	f.Add([]byte{0x32, 0, 0x10, 0, 0x0f, 0xf6, 0, 0, 0x1f, 0xf0}, false)
	f.Add([]byte{0x0f, 0xfa, 0x0f, 0xfb, 0x0f, 0xfc, 0x08, 0x00, 0x08, 0x01}, true)
	f.Fuzz(func(t *testing.T, sizes []byte, headersFirst bool) {
		var steps []int
		for i := 0; i+1 < len(sizes) && len(steps) < 12; i += 2 {
			steps = append(steps, int(sizes[i])<<8|int(sizes[i+1]))
		}
		if len(steps) == 0 {
			return // nothing written: a response with no body, not a stream
		}
		url, next, conns := flushServerWith(t, steps, headersFirst)
		br := rawGet(t, url, "HTTP/1.1", 10*time.Second)
		if !headersFirst {
			next <- struct{}{} // the headers go out with the first step
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		rc := <-conns
		var want strings.Builder
		for i, n := range steps {
			if i > 0 || headersFirst {
				next <- struct{}{}
			}
			got := make([]byte, n)
			if _, err := io.ReadFull(resp.Body, got); err != nil {
				t.Fatalf("step %d of %v: %v", i, steps, err)
			}
			if n > 0 {
				if string(got) != strings.Repeat(string('a'+byte(i)), n) {
					t.Fatalf("step %d of %v: wrong bytes", i, steps)
				}
				want.WriteString(chunk(n, 'a'+byte(i)) + "\r\n")
			}
		}
		next <- struct{}{}
		if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) > 0 {
			t.Fatalf("after the last step of %v: %d more bytes, %v", steps, len(rest), err)
		}
		want.WriteString("0\r\n\r\n")
		sent := bytes.Join(rc.take(), nil)
		_, body, _ := bytes.Cut(sent, []byte("\r\n\r\n"))
		if string(body) != want.String() {
			t.Fatalf("steps %v: the connection carried %d body bytes, want %d", steps, len(body), want.Len())
		}
	})
}
