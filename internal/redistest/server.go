package redistest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binaries used; tests fail with a clear message when they are missing.
const (
	serverBin = "redis-server"
	cliBin    = "redis-cli"
)

// readyTimeout bounds how long a starting server may take to answer PING
// (it may be loading a snapshot), and stopTimeout how long a stopping one
// may take to save and exit before it is killed.
const (
	readyTimeout = 15 * time.Second
	stopTimeout  = 15 * time.Second
)

// Server is a redis-server process listening on 127.0.0.1. Its methods are
// safe for concurrent use and, unlike the constructors, may be called from
// any goroutine: they return errors instead of failing the test.
type Server struct {
	port int
	dir  string
	args []string // extra configuration, e.g. cluster mode

	mu   sync.Mutex // guards following
	cmd  *exec.Cmd  // nil while stopped
	done chan struct{}
}

// NewServer starts a standalone redis-server on a free loopback port and
// stops it in t.Cleanup.
func NewServer(t testing.TB) *Server {
	t.Helper()
	return newServer(t)
}

func newServer(t testing.TB, extra ...string) *Server {
	t.Helper()
	if _, err := exec.LookPath(serverBin); err != nil {
		t.Fatalf("redistest: %s not installed (apt-get install redis-server): %v", serverBin, err)
	}
	var lastErr error
	for range 5 { // a free port can be taken by someone else before redis binds it
		s := &Server{dir: t.TempDir(), args: extra}
		var err error
		if s.port, err = freePort(); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		if lastErr = s.Start(); lastErr == nil {
			t.Cleanup(func() { s.Kill() })
			return s
		}
	}
	t.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago,
// below the kernel's ephemeral range when it can: a server stopped and
// started again (Stop, Start) must find its port free, and a port of that
// range can be taken meanwhile as the local end of any outgoing
// connection, even of one to that very port, which a client retrying
// against the stopped server makes (a TCP self-connect). Ports of the
// ephemeral range (port 0) are the fallback.
func freePort() (int, error) {
	if lo := ephemeralLow(); lo > minPort+1000 {
		for range 64 {
			p := minPort + rand.IntN(lo-minPort)
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
				l.Close()
				return p, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// minPort is the lowest port freePort picks.
const minPort = 10000

// ephemeralLow returns the first port of the kernel's ephemeral range
// (Linux's ip_local_port_range), 0 when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// Addr returns host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns redis://127.0.0.1:port.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Dir returns the server's working directory (snapshot, log, nodes.conf).
func (s *Server) Dir() string { return s.dir }

// Start starts the server (again) on its port and directory and returns once
// it answers PING. Starting a running server is a no-op.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--dir", s.dir, "--logfile", "redis.log", "--daemonize", "no",
		"--save", "", "--appendonly", "no", "--shutdown-on-sigterm", "save",
	}, s.args...)
	cmd := exec.Command(serverBin, args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", serverBin, err)
	}
	done := make(chan struct{})
	go waitProcess(cmd, done)
	if err := waitReady(s.Addr(), done); err != nil {
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("redis on %s: %w (log: %s)", s.Addr(), err, s.logTail())
	}
	s.cmd, s.done = cmd, done
	return nil
}

// waitProcess reaps cmd and closes done when it has exited.
func waitProcess(cmd *exec.Cmd, done chan<- struct{}) {
	cmd.Wait()
	close(done)
}

// waitReady polls PING until the server answers PONG, the process exits or
// readyTimeout passes.
func waitReady(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for time.Now().Before(deadline) {
		reply, err := do(addr, time.Second, "PING")
		if err == nil && reply == "PONG" {
			return nil
		}
		lastErr = err
		select {
		case <-exited:
			return errors.New("process exited before answering PING")
		case <-tick.C:
		}
	}
	return fmt.Errorf("no PONG within %v: %v", readyTimeout, lastErr)
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Stop shuts the server down gracefully (SIGTERM: it saves a snapshot of
// its data first) and waits for it to exit. [Server.Start] brings it back
// with the same data. Stopping a stopped server is a no-op.
func (s *Server) Stop() error { return s.signal(syscall.SIGTERM) }

// Kill kills the server at once (SIGKILL): data since the last Stop is
// lost. Killing a stopped server is a no-op.
func (s *Server) Kill() error { return s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal redis on %s: %w", s.Addr(), err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(stopTimeout):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("redis on %s did not exit within %v after %v; killed", s.Addr(), stopTimeout, sig)
	}
}

// URL returns REDIS_URL when it is set and otherwise starts a server for
// t and returns its URL.
func URL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return NewServer(t).URL()
}
