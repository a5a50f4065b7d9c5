package redisstore

import (
	"context"
	"testing"

	"github.com/orchard-rl/orchard/internal/redistest"
)

// TestPoisonedRecordQuarantined: an undecodable frame pushed onto an
// episode's log leaves its good calls readable with the frame reported,
// other episodes untouched, and later writes to the episode (from this
// replica, whose dedup state is now stale, and from a fresh one) working.
func TestPoisonedRecordQuarantined(t *testing.T) {
	ctx := context.Background()
	url := redistest.URL(t)
	s := openT(t, url, Options{})
	all := chatEpisode("ep-p", 5, 200)
	writeT(t, s, all[:3]...)
	writeT(t, s, chatEpisode("ep-other", 2, 200)...)
	if err := s.rdb.RPush(ctx, s.keys.episode("ep-p").log, "\xff\xfe not a packed call").Err(); err != nil {
		t.Fatal(err)
	}
	calls, bad, err := s.CallsChecked(ctx, "ep-p")
	if err != nil {
		t.Fatalf("CallsChecked: %v", err)
	}
	assertCalls(t, calls, all[:3])
	if len(bad) != 1 || bad[0].Position != 4 || bad[0].Reason == "" {
		t.Fatalf("quarantined = %+v, want the frame at position 4 with a reason", bad)
	}
	assertCalls(t, callsT(t, s, "ep-other"), chatEpisode("ep-other", 2, 200))
	writeT(t, s, all[3])
	writeT(t, twin(t, url, s), all[4])
	assertCalls(t, callsT(t, s, "ep-p"), all)
}
