package embedded

import (
	"context"
	"os"
	"testing"
	"time"
)

// plantPoison appends to the store's log a call frame that indexes as a
// call of ep but whose body is garbage: a record that cannot be decoded.
func plantPoison(t *testing.T, dir, ep, callID string) {
	t.Helper()
	p := appendCallHeader(nil, callHeader{episode: ep, callID: callID, started: time.Now().UTC()})
	p = append(p, "\xff\xfe this is not a packed call"...)
	segs, err := listSegments(dir)
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	f, err := os.OpenFile(segPath(dir, segs[len(segs)-1]), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(appendFrame(nil, p)); err != nil {
		t.Fatal(err)
	}
}

// TestPoisonedRecordQuarantined: an undecodable call in an episode leaves
// the episode's good calls readable, reported beside them, other episodes
// untouched, and new writes to the episode working (its dedup state is
// rebuilt fresh instead of failing every write).
func TestPoisonedRecordQuarantined(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	good := chatEpisode("ep-p", 3, 200)
	writeT(t, s, good...)
	writeT(t, s, chatEpisode("ep-other", 2, 200)...)
	s.Close()
	plantPoison(t, dir, "ep-p", "call-poison")

	s = openT(t, dir, Options{})
	calls, bad, err := s.CallsChecked(context.Background(), "ep-p")
	if err != nil {
		t.Fatalf("CallsChecked: %v", err)
	}
	assertCalls(t, calls, good)
	if len(bad) != 1 || bad[0].CallID != "call-poison" || bad[0].Position != 4 || bad[0].Reason == "" {
		t.Fatalf("quarantined = %+v, want call-poison at position 4 with a reason", bad)
	}
	assertCalls(t, callsT(t, s, "ep-other"), chatEpisode("ep-other", 2, 200))

	more := chatEpisode("ep-p", 5, 200)[3:]
	writeT(t, s, more...)
	assertCalls(t, callsT(t, s, "ep-p"), chatEpisode("ep-p", 5, 200))
}
