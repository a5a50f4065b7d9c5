package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

// The listing and paging behaviour is the conformance suite's
// (recorder/storetest, run in conformance_test.go); what is left here is the
// embedded store's own: a read-only reader and a reopened writer both see a
// deletion.

func TestEventsAndDelete(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	ctx := context.Background()
	storetest.SeedEpisodes(t, s)
	for i, typ := range []string{"tests", "reward", "note"} {
		seq, err := s.AppendEvent(ctx, &recorder.Event{EpisodeID: "e1", Type: typ, Data: json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)})
		if err != nil || seq != int64(i+1) {
			t.Fatalf("AppendEvent #%d = %d, %v", i+1, seq, err)
		}
	}
	evs, err := s.Events(ctx, "e1")
	if err != nil || len(evs) != 3 || evs[2].Type != "note" || evs[2].Seq != 3 || string(evs[1].Data) != `{"i":1}` {
		t.Fatalf("Events = %+v, %v", evs, err)
	}
	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := s.DeleteEpisode(ctx, "e1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEpisode(ctx, "e1"); !errors.Is(err, recorder.ErrNotFound) {
		t.Fatalf("second DeleteEpisode error = %v, want ErrNotFound", err)
	}
	s.Close()
	s = openT(t, dir, Options{})
	for name, st := range map[string]*Store{"writer after reopen": s, "reader": r} {
		if _, err := st.Calls(ctx, "e1"); !errors.Is(err, recorder.ErrNotFound) {
			t.Fatalf("%s: Calls(e1) error = %v, want ErrNotFound", name, err)
		}
		if _, err := st.Events(ctx, "e1"); !errors.Is(err, recorder.ErrNotFound) {
			t.Fatalf("%s: Events(e1) error = %v, want ErrNotFound", name, err)
		}
		if all, _, _ := st.ListEpisodes(ctx, recorder.Filter{}); slices.Contains(storetest.IDs(all), "e1") {
			t.Fatalf("%s: deleted episode still listed", name)
		}
	}
	calls := chatEpisode("e1", 2, 50) // the id can be used again
	writeT(t, s, calls...)
	assertCalls(t, callsT(t, s, "e1"), calls)
}
