package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// waitQueued waits until c's socket has at least n bytes received and
// not yet read (the kernel's count, FIONREAD), or fails after ten seconds.
func waitQueued(t *testing.T, c net.Conn, n int) {
	t.Helper()
	raw := c.(*upstreamConn).raw
	for end := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		var queued int32
		var errno syscall.Errno
		raw.Control(func(fd uintptr) {
			_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&queued)))
		})
		if errno != 0 {
			t.Fatalf("FIONREAD: %v", errno)
		}
		if int(queued) >= n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d of %d bytes arrived in ten seconds", queued, n)
		}
	}
}

// TestBodyReadTakesBacklog checks that an upstream connection reads what
// has arrived at once, though the HTTP reader asks for 4 KiB at a time,
// and that one read of a response body returns all of it: 20 KB of events that had all
// arrived come out of one read, so the client gets them in one write. (A
// read stops early where the reader's buffer ends exactly between two
// chunks; the events here are laid out so that none does.)
func TestBodyReadTakesBacklog(t *testing.T) {
	c, peer := upstreamPair(t)
	var body, raw bytes.Buffer
	raw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	for i := 0; body.Len() < 20<<10; i++ {
		ev := fmt.Sprintf("data: {\"event\":%02d,\"text\":%q}\n\n", i, strings.Repeat("x", 150))
		body.WriteString(ev)
		fmt.Fprintf(&raw, "%x\r\n%s\r\n", len(ev), ev)
		if off := (raw.Len() + 8) % 4096; off > 0 && off <= 10 {
			t.Fatalf("chunk %d ends next to a multiple of 4096 bytes, where the reader would stop", i)
		}
	}
	raw.WriteString("0\r\n\r\n")
	if _, err := peer.Write(raw.Bytes()); err != nil {
		t.Fatal(err)
	}
	waitQueued(t, c, raw.Len())

	br := bufio.NewReaderSize(c, newTransport().ReadBufferSize) // as the Transport reads it
	if br.Size() != 4096 {
		t.Fatalf("the Transport reads through %d bytes; the test lays its chunks out for 4096", br.Size())
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	// One socket read took all; the reader has its 4 KiB of it.
	uc := c.(*upstreamConn)
	if uc.unread == nil || uc.end-uc.off != raw.Len()-4096 {
		t.Fatalf("the connection holds %d bytes after the reader's first 4 KiB; want the other %d it read at once", uc.end-uc.off, raw.Len()-4096)
	}
	p := make([]byte, upstreamReadBuffer)
	n, err := res.Body.Read(p)
	if n != body.Len() || !bytes.Equal(p[:n], body.Bytes()) {
		t.Fatalf("one read of the body returned %d bytes (%v); want all %d, as they had arrived", n, err, body.Len())
	}
	if uc.unread != nil {
		t.Fatalf("the connection holds a buffer of %d unread bytes once the body is read", uc.end-uc.off)
	}
}
