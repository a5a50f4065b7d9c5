package embedded

import (
	"bytes"
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
	epoch       = storetest.Epoch
	chatEpisode = storetest.ChatEpisode
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

// assertCalls checks got against want: same ids in order, Seq 1..n and
// byte-identical request, response and usage.
func assertCalls(t testing.TB, got, want []*recorder.Call) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d calls, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.CallID != w.CallID || g.Seq != int64(i+1) || g.EpisodeID != w.EpisodeID || !g.StartedAt.Equal(w.StartedAt) {
			t.Fatalf("call %d = %s seq %d ep %s, want %s seq %d ep %s", i, g.CallID, g.Seq, g.EpisodeID, w.CallID, i+1, w.EpisodeID)
		}
		if !bytes.Equal(g.Request, w.Request) || !bytes.Equal(g.Response, w.Response) || !bytes.Equal(g.Usage, w.Usage) {
			t.Fatalf("call %s: bodies differ after round trip", w.CallID)
		}
	}
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
