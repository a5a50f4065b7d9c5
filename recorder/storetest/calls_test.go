package storetest

import (
	"testing"
)

func TestChatEpisodeGrows(t *testing.T) {
	calls := ChatEpisode("ep", 200, 500)
	if n := len(calls[199].Request); n < 95_000 || n > 130_000 {
		t.Fatalf("final request of 200 turns is %d bytes, want ~100 KB", n)
	}
	for i := 1; i < len(calls); i++ {
		if !calls[i].StartedAt.After(calls[i-1].StartedAt) || len(calls[i].Request) <= len(calls[i-1].Request) {
			t.Fatalf("call %d does not follow call %d", i, i-1)
		}
	}
}

func TestFixtures(t *testing.T) {
	eps := Fixtures(t)
	if len(eps) != 4 {
		t.Fatalf("Fixtures = %d episodes, want 4 (one per harness)", len(eps))
	}
	for ep, calls := range eps {
		if len(calls) == 0 || calls[0].EpisodeID != ep || len(calls[0].Request) == 0 {
			t.Fatalf("episode %s: %d calls, first %+v", ep, len(calls), calls[0])
		}
	}
}
