package redistest

import (
	"fmt"
	"syscall"
)

// Pause stops the server process (SIGSTOP): it keeps its connections open
// but answers nothing, like a server stalled on a slow disk, until
// [Server.Resume]. Cleanup still kills a paused server.
func (s *Server) Pause() error { return s.pauseSignal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.pauseSignal(syscall.SIGCONT) }

func (s *Server) pauseSignal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("signal redis on %s: not running", s.Addr())
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal redis on %s: %w", s.Addr(), err)
	}
	return nil
}
