package redistest

import (
	"strings"
	"testing"
	"time"
)

func TestServerStopStart(t *testing.T) {
	s := NewServer(t)
	// Below the ephemeral range, so that no outgoing connection (a client
	// retrying against the stopped server connects to itself) takes the
	// port before Start binds it again.
	if lo := ephemeralLow(); lo > minPort+1000 && (s.port < minPort || s.port >= lo) {
		t.Fatalf("port %d, want one in [%d, %d)", s.port, minPort, lo)
	}
	if _, err := do(s.Addr(), time.Second, "SET", "k", "v1"); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := do(s.Addr(), time.Second, "PING"); err == nil {
		t.Fatal("PING answered while stopped")
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if got, err := do(s.Addr(), time.Second, "GET", "k"); err != nil || got != "v1" {
		t.Fatalf("GET k after Stop/Start = %q, %v; want v1", got, err)
	}
	if err := s.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start after Kill: %v", err)
	}
	if got, err := do(s.Addr(), time.Second, "DBSIZE"); err != nil || got != "1" {
		t.Fatalf("DBSIZE after Kill/Start = %q, %v; want 1 (the snapshot of Stop)", got, err)
	}
	if !strings.HasPrefix(s.URL(), "redis://127.0.0.1:") {
		t.Fatalf("URL() = %q", s.URL())
	}
}

func TestCluster(t *testing.T) {
	c := NewCluster(t)
	info, err := do(c.Nodes[0].Addr(), time.Second, "CLUSTER", "INFO")
	if err != nil || !strings.Contains(info, "cluster_known_nodes:3") {
		t.Fatalf("CLUSTER INFO = %q, %v; want 3 known nodes", firstLine(info), err)
	}
	if err := c.Nodes[1].Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[1].Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitOK(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(c.URL(), ","); !strings.HasPrefix(c.URL(), "redis+cluster://") || got != 2 {
		t.Fatalf("URL() = %q", c.URL())
	}
}
