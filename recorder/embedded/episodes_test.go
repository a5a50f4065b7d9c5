package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/recorder"
)

func ids(sums []recorder.EpisodeSummary) []string {
	out := make([]string, len(sums))
	for i, s := range sums {
		out[i] = s.ID
	}
	return out
}

// seedEpisodes stores five episodes: four with metadata, one (e5) with
// calls only, created one minute apart.
func seedEpisodes(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	for i, ep := range []recorder.Episode{
		{ID: "e1", TaskID: "t1", GroupID: "g1", Status: recorder.StatusSuccess},
		{ID: "e2", TaskID: "t1", GroupID: "g2", Status: recorder.StatusFailure},
		{ID: "e3", TaskID: "t2", GroupID: "g1"},
		{ID: "e4", TaskID: "t2", GroupID: "g2", Status: recorder.StatusRunning},
	} {
		ep.CreatedAt = epoch.Add(time.Duration(i) * time.Minute)
		if err := s.PutEpisode(ctx, &ep); err != nil {
			t.Fatal(err)
		}
	}
	calls := chatEpisode("e5", 2, 50)
	for _, c := range calls {
		c.StartedAt = c.StartedAt.Add(4 * time.Minute)
	}
	writeT(t, s, calls...)
	writeT(t, s, chatEpisode("e1", 3, 50)...)
}

func TestListEpisodes(t *testing.T) {
	s := openT(t, t.TempDir(), Options{NoSync: true})
	seedEpisodes(t, s)
	tests := []struct {
		name string
		f    recorder.Filter
		want []string
	}{
		{"all", recorder.Filter{}, []string{"e1", "e2", "e3", "e4", "e5"}},
		{"task", recorder.Filter{TaskID: "t1"}, []string{"e1", "e2"}},
		{"group", recorder.Filter{GroupID: "g1"}, []string{"e1", "e3"}},
		{"running includes calls-only", recorder.Filter{Status: recorder.StatusRunning}, []string{"e3", "e4", "e5"}},
		{"since", recorder.Filter{Since: epoch.Add(3 * time.Minute)}, []string{"e4", "e5"}},
		{"task and status", recorder.Filter{TaskID: "t2", Status: recorder.StatusRunning}, []string{"e3", "e4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, next, err := s.ListEpisodes(context.Background(), tt.f)
			if err != nil || next != "" || !slices.Equal(ids(got), tt.want) {
				t.Fatalf("ListEpisodes(%+v) = %v, %q, %v; want %v", tt.f, ids(got), next, err, tt.want)
			}
		})
	}
	sum, err := s.Episode(context.Background(), "e1")
	if err != nil || sum.Calls != 3 || sum.FirstCallAt == nil || !sum.FirstCallAt.Equal(epoch) || !sum.LastCallAt.Equal(epoch.Add(2*time.Second)) {
		t.Fatalf("Episode(e1) = %+v, %v; want 3 calls from %v", sum, err, epoch)
	}
	if _, err := s.Episode(context.Background(), "nope"); !errors.Is(err, recorder.ErrNotFound) {
		t.Fatalf("Episode(nope) error = %v, want ErrNotFound", err)
	}
}

func TestListEpisodesPaging(t *testing.T) {
	s := openT(t, t.TempDir(), Options{NoSync: true})
	seedEpisodes(t, s)
	var got []string
	f := recorder.Filter{Limit: 2}
	for pages := 0; ; pages++ {
		page, next, err := s.ListEpisodes(context.Background(), f)
		if err != nil || pages > 5 {
			t.Fatalf("page %d: %v", pages, err)
		}
		got = append(got, ids(page)...)
		if next == "" {
			break
		}
		f.Cursor = next
		if pages == 0 { // an episode created between pages sorts last and is not skipped
			s.PutEpisode(context.Background(), &recorder.Episode{ID: "e6", CreatedAt: epoch.Add(time.Hour)})
		}
	}
	if want := []string{"e1", "e2", "e3", "e4", "e5", "e6"}; !slices.Equal(got, want) {
		t.Fatalf("pages = %v, want %v", got, want)
	}
	if _, _, err := s.ListEpisodes(context.Background(), recorder.Filter{Cursor: "!!"}); err == nil {
		t.Fatal("ListEpisodes accepted a bad cursor")
	}
}

func TestEventsAndDelete(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	ctx := context.Background()
	seedEpisodes(t, s)
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
		if all, _, _ := st.ListEpisodes(ctx, recorder.Filter{}); slices.Contains(ids(all), "e1") {
			t.Fatalf("%s: deleted episode still listed", name)
		}
	}
	calls := chatEpisode("e1", 2, 50) // the id can be used again
	writeT(t, s, calls...)
	assertCalls(t, callsT(t, s, "e1"), calls)
}
