package agent

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// bridge listens on a loopback TCP address inside the sandbox and joins
// every connection to the Unix socket of envd's gate (network mode
// proxy): the harness's base URL points here, and envd decides what
// passes. Close stops it and waits for every connection.
type bridge struct {
	ln   net.Listener
	sock string
	wg   sync.WaitGroup

	mu    sync.Mutex // guards following
	conns map[net.Conn]bool
}

// startBridge listens on addr and forwards to the Unix socket sock.
func startBridge(addr, sock string) (*bridge, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for the proxy bridge on %s: %w", addr, err)
	}
	b := &bridge{ln: ln, sock: sock, conns: map[net.Conn]bool{}}
	b.wg.Add(1)
	go b.acceptLoop()
	return b, nil
}

func (b *bridge) acceptLoop() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Add(1)
		go b.join(c)
	}
}

// join copies c to and from a new connection to the gate.
func (b *bridge) join(c net.Conn) {
	defer b.wg.Done()
	defer c.Close()
	up, err := net.Dial("unix", b.sock)
	if err != nil {
		return
	}
	defer up.Close()
	if !b.track(c, up) {
		return
	}
	defer b.untrack(c, up)
	done := make(chan struct{})
	go func() { // ends when either side closes; join waits for it
		_, _ = io.Copy(up, c)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(c, up)
	_ = c.Close()
	<-done
}

// track registers open connections so Close can cut them; it reports
// false once the bridge is closed.
func (b *bridge) track(cs ...net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns == nil {
		return false
	}
	for _, c := range cs {
		b.conns[c] = true
	}
	return true
}

func (b *bridge) untrack(cs ...net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		delete(b.conns, c)
	}
}

// Close stops accepting, cuts open connections and waits.
func (b *bridge) Close() {
	_ = b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		_ = c.Close()
	}
	b.conns = nil
	b.mu.Unlock()
	b.wg.Wait()
}
