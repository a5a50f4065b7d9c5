package embedded

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

// The call builders are the conformance suite's, so that both backends'
// tests write the same episodes.
var (
	chatEpisode = storetest.ChatEpisode
	assertCalls = storetest.AssertCalls
)

func openT(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func writeT(t testing.TB, s *Store, calls ...*recorder.Call) {
	t.Helper()
	if err := s.WriteCalls(context.Background(), calls); err != nil {
		t.Fatalf("WriteCalls: %v", err)
	}
}

func callsT(t testing.TB, s *Store, ep string) []*recorder.Call {
	t.Helper()
	got, err := s.Calls(context.Background(), ep)
	if err != nil {
		t.Fatalf("Calls(%s): %v", ep, err)
	}
	return got
}

// segBytes is the on-disk size of the log.
func segBytes(t testing.TB, dir string) int64 {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range m {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}
