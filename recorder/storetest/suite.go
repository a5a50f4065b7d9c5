package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/recorder"
)

// Backend is what [Run] needs of a store implementation.
type Backend struct {
	// Open returns an empty store; the caller closes it in t.Cleanup.
	Open func(t *testing.T) recorder.Store
	// Reopen returns another store on the same data as s: the same
	// directory opened again, or another replica of a shared store. The
	// suite uses only the returned store afterwards. Nil skips the checks
	// that need it.
	Reopen func(t *testing.T, s recorder.Store) recorder.Store
}

// Run runs the conformance suite against b, one subtest per behaviour.
func Run(t *testing.T, b Backend) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Backend)
	}{
		{"RoundTripFixtures", testRoundTripFixtures},
		{"Idempotent", testIdempotent},
		{"Unattributed", testUnattributed},
		{"OddIDs", testOddIDs},
		{"ConcurrentWrites", testConcurrentWrites},
		{"InterleavedWrite", testInterleavedWrite},
		{"ListEpisodes", testListEpisodes},
		{"ListEpisodesPaging", testListEpisodesPaging},
		{"EventsAndDelete", testEventsAndDelete},
		{"CreateEpisode", testCreateEpisode},
		{"CallAfterFinish", testCallAfterFinish},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, b) })
	}
}

// Write stores calls or fails the test.
func Write(t testing.TB, s recorder.Store, calls ...*recorder.Call) {
	t.Helper()
	if err := s.WriteCalls(context.Background(), calls); err != nil {
		t.Fatalf("WriteCalls: %v", err)
	}
}

// Calls reads an episode's calls or fails the test.
func Calls(t testing.TB, s recorder.Store, ep string) []*recorder.Call {
	t.Helper()
	got, err := s.Calls(context.Background(), ep)
	if err != nil {
		t.Fatalf("Calls(%s): %v", ep, err)
	}
	return got
}

// IDs returns the ids of summaries.
func IDs(sums []recorder.EpisodeSummary) []string {
	out := make([]string, len(sums))
	for i, s := range sums {
		out[i] = s.ID
	}
	return out
}

func testRoundTripFixtures(t *testing.T, b Backend) {
	s := b.Open(t)
	want := Fixtures(t)
	for _, calls := range want {
		for _, c := range calls {
			Write(t, s, c) // one call per batch, as a live proxy would
		}
	}
	for ep, w := range want {
		AssertCalls(t, Calls(t, s, ep), w)
	}
	if b.Reopen != nil {
		s = b.Reopen(t, s)
		for ep, w := range want {
			AssertCalls(t, Calls(t, s, ep), w)
		}
	}
}

func testIdempotent(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := context.Background()
	calls := ChatEpisode("ep", 5, 200)
	Write(t, s, calls[0], calls[1], calls[0]) // duplicate inside a batch
	Write(t, s, calls[1], calls[0])           // a replay
	AssertCalls(t, Calls(t, s, "ep"), calls[:2])
	Write(t, s, calls...)
	if b.Reopen != nil {
		s = b.Reopen(t, s)
		Write(t, s, calls[3], calls[4], calls[2]) // still known
	}
	AssertCalls(t, Calls(t, s, "ep"), calls)
	if sum, err := s.Episode(ctx, "ep"); err != nil || sum.Calls != 5 {
		t.Fatalf("Episode = %+v, %v; want 5 calls", sum, err)
	}
}

func testUnattributed(t *testing.T, b Backend) {
	s := b.Open(t)
	c := ChatEpisode("ep", 1, 10)[0]
	c.CallID = ""
	if err := s.WriteCalls(context.Background(), []*recorder.Call{c}); err == nil {
		t.Fatal("WriteCalls accepted a call without call_id")
	}
	c = ChatEpisode("", 1, 10)[0]
	Write(t, s, c)
	if got := Calls(t, s, recorder.Unattributed); len(got) != 1 || got[0].EpisodeID != recorder.Unattributed {
		t.Fatalf("call without episode stored as %+v, want under %q", got, recorder.Unattributed)
	}
	if c.EpisodeID != "" {
		t.Fatal("WriteCalls modified its input")
	}
	if _, err := s.Calls(context.Background(), "nope"); !errors.Is(err, recorder.ErrNotFound) {
		t.Fatalf("Calls(nope) error = %v, want ErrNotFound", err)
	}
}

// testOddIDs stores episodes whose ids hold characters that key schemes
// tend to treat specially.
func testOddIDs(t *testing.T, b Backend) {
	s := b.Open(t)
	for _, ep := range []string{"a{b}c", "}{", "%7B", "{", "a:b", "ä/ö ü"} {
		calls := ChatEpisode(ep, 3, 100)
		Write(t, s, calls...)
		AssertCalls(t, Calls(t, s, ep), calls)
	}
}

// testConcurrentWrites writes the turns of several episodes from several
// goroutines at once, each turn after the one before it.
func testConcurrentWrites(t *testing.T, b Backend) {
	s := b.Open(t)
	eps := map[string][]*recorder.Call{}
	for i := range 5 {
		ep := fmt.Sprintf("c%d", i)
		eps[ep] = ChatEpisode(ep, 12, 300)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(eps))
	for _, calls := range eps {
		wg.Go(func() {
			for _, c := range calls {
				if err := s.WriteCalls(context.Background(), []*recorder.Call{c}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for ep, calls := range eps {
		AssertCalls(t, Calls(t, s, ep), calls)
	}
}

// testInterleavedWrite stores the turns of many episodes, interleaved, in
// one write, then again with the next turns: a store that encodes a
// write's episodes side by side must keep each episode's calls in order.
func testInterleavedWrite(t *testing.T, b Backend) {
	s := b.Open(t)
	var eps [][]*recorder.Call
	for i := range 20 {
		eps = append(eps, ChatEpisode(fmt.Sprintf("i%02d", i), 8, 300))
	}
	for _, turns := range [][2]int{{0, 5}, {5, 8}} {
		var batch []*recorder.Call
		for turn := turns[0]; turn < turns[1]; turn++ {
			for _, calls := range eps {
				batch = append(batch, calls[turn])
			}
		}
		Write(t, s, batch...)
	}
	for _, calls := range eps {
		AssertCalls(t, Calls(t, s, calls[0].EpisodeID), calls)
	}
}

// SeedEpisodes stores five episodes: four with metadata, one (e5) with
// calls only, created one minute apart.
func SeedEpisodes(t *testing.T, s recorder.Store) {
	t.Helper()
	ctx := context.Background()
	for i, ep := range []recorder.Episode{
		{ID: "e1", TaskID: "t1", GroupID: "g1", Status: recorder.StatusSuccess},
		{ID: "e2", TaskID: "t1", GroupID: "g2", Status: recorder.StatusFailure},
		{ID: "e3", TaskID: "t2", GroupID: "g1"},
		{ID: "e4", TaskID: "t2", GroupID: "g2", Status: recorder.StatusRunning},
	} {
		ep.CreatedAt = Epoch.Add(time.Duration(i) * time.Minute)
		if err := s.PutEpisode(ctx, &ep); err != nil {
			t.Fatal(err)
		}
	}
	calls := ChatEpisode("e5", 2, 50)
	for _, c := range calls {
		c.StartedAt = c.StartedAt.Add(4 * time.Minute)
	}
	Write(t, s, calls...)
	Write(t, s, ChatEpisode("e1", 3, 50)...)
}

func listT(t *testing.T, s recorder.Store, f recorder.Filter, want []string) {
	t.Helper()
	got, next, err := s.ListEpisodes(context.Background(), f)
	if err != nil || next != "" || !slices.Equal(IDs(got), want) {
		t.Fatalf("ListEpisodes(%+v) = %v, %q, %v; want %v", f, IDs(got), next, err, want)
	}
}

func testListEpisodes(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := context.Background()
	SeedEpisodes(t, s)
	tests := []struct {
		name string
		f    recorder.Filter
		want []string
	}{
		{"all", recorder.Filter{}, []string{"e1", "e2", "e3", "e4", "e5"}},
		{"task", recorder.Filter{TaskID: "t1"}, []string{"e1", "e2"}},
		{"group", recorder.Filter{GroupID: "g1"}, []string{"e1", "e3"}},
		{"running includes calls-only", recorder.Filter{Status: recorder.StatusRunning}, []string{"e3", "e4", "e5"}},
		{"since", recorder.Filter{Since: Epoch.Add(3 * time.Minute)}, []string{"e4", "e5"}},
		{"task and status", recorder.Filter{TaskID: "t2", Status: recorder.StatusRunning}, []string{"e3", "e4"}},
		{"group and status", recorder.Filter{GroupID: "g2", Status: recorder.StatusFailure}, []string{"e2"}},
		{"no match", recorder.Filter{TaskID: "t9"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { listT(t, s, tt.f, tt.want) })
	}
	sum, err := s.Episode(ctx, "e1")
	if err != nil || sum.Calls != 3 || sum.FirstCallAt == nil || !sum.FirstCallAt.Equal(Epoch) || !sum.LastCallAt.Equal(Epoch.Add(2*time.Second)) || sum.TaskID != "t1" {
		t.Fatalf("Episode(e1) = %+v, %v; want 3 calls from %v", sum, err, Epoch)
	}
	sum, err = s.Episode(ctx, "e5")
	if err != nil || sum.Status != recorder.StatusRunning || !sum.CreatedAt.Equal(Epoch.Add(4*time.Minute)) {
		t.Fatalf("Episode(e5) = %+v, %v; want running, created at its first call", sum, err)
	}
	if _, err := s.Episode(ctx, "nope"); !errors.Is(err, recorder.ErrNotFound) {
		t.Fatalf("Episode(nope) error = %v, want ErrNotFound", err)
	}
	// Finishing e4 changes its status; an earlier call moves e5 first.
	if err := s.PutEpisode(ctx, &recorder.Episode{ID: "e4", TaskID: "t2", GroupID: "g2", Status: recorder.StatusSuccess, CreatedAt: Epoch.Add(3 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	early := ChatEpisode("e5", 1, 50)[0]
	early.CallID, early.StartedAt = "e5-early", Epoch.Add(-time.Hour)
	Write(t, s, early)
	listT(t, s, recorder.Filter{Status: recorder.StatusRunning}, []string{"e5", "e3"})
	listT(t, s, recorder.Filter{Status: recorder.StatusSuccess}, []string{"e1", "e4"})
	listT(t, s, recorder.Filter{}, []string{"e5", "e1", "e2", "e3", "e4"})
}

func testListEpisodesPaging(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := context.Background()
	SeedEpisodes(t, s)
	var got []string
	f := recorder.Filter{Limit: 2}
	for pages := 0; ; pages++ {
		page, next, err := s.ListEpisodes(ctx, f)
		if err != nil || pages > 5 {
			t.Fatalf("page %d: %v", pages, err)
		}
		got = append(got, IDs(page)...)
		if next == "" {
			break
		}
		f.Cursor = next
		if pages == 0 { // an episode created between pages sorts last and is not skipped
			if err := s.PutEpisode(ctx, &recorder.Episode{ID: "e6", CreatedAt: Epoch.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := []string{"e1", "e2", "e3", "e4", "e5", "e6"}; !slices.Equal(got, want) {
		t.Fatalf("pages = %v, want %v", got, want)
	}
	page, next, err := s.ListEpisodes(ctx, recorder.Filter{Limit: 1, TaskID: "t2", Since: Epoch.Add(150 * time.Second)})
	if err != nil || !slices.Equal(IDs(page), []string{"e4"}) || next != "" {
		t.Fatalf("ListEpisodes(task t2, since, limit 1) = %v, %q, %v; want [e4] and no cursor", IDs(page), next, err)
	}
	if _, _, err := s.ListEpisodes(ctx, recorder.Filter{Cursor: "!!"}); err == nil {
		t.Fatal("ListEpisodes accepted a bad cursor")
	}
}

func testEventsAndDelete(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := context.Background()
	SeedEpisodes(t, s)
	for i, typ := range []string{"tests", "reward", "note"} {
		seq, err := s.AppendEvent(ctx, &recorder.Event{EpisodeID: "e1", Type: typ, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		if err != nil || seq != int64(i+1) {
			t.Fatalf("AppendEvent #%d = %d, %v", i+1, seq, err)
		}
	}
	evs, err := s.Events(ctx, "e1")
	if err != nil || len(evs) != 3 || evs[2].Type != "note" || evs[2].Seq != 3 || string(evs[1].Data) != `{"i":1}` || evs[0].At.IsZero() {
		t.Fatalf("Events = %+v, %v", evs, err)
	}
	if seq, err := s.AppendEvent(ctx, &recorder.Event{EpisodeID: "e7", Type: "first", Data: json.RawMessage(`{}`)}); err != nil || seq != 1 {
		t.Fatalf("AppendEvent to a new episode = %d, %v", seq, err)
	}
	if all, _, _ := s.ListEpisodes(ctx, recorder.Filter{}); !slices.Contains(IDs(all), "e7") {
		t.Fatalf("episode with only an event not listed: %v", IDs(all))
	}
	if err := s.DeleteEpisode(ctx, "e1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEpisode(ctx, "e1"); !errors.Is(err, recorder.ErrNotFound) {
		t.Fatalf("second DeleteEpisode error = %v, want ErrNotFound", err)
	}
	stores := map[string]recorder.Store{"writer": s}
	if b.Reopen != nil {
		s = b.Reopen(t, s)
		stores = map[string]recorder.Store{"reopened": s}
	}
	for name, st := range stores {
		if _, err := st.Calls(ctx, "e1"); !errors.Is(err, recorder.ErrNotFound) {
			t.Fatalf("%s: Calls(e1) error = %v, want ErrNotFound", name, err)
		}
		if _, err := st.Events(ctx, "e1"); !errors.Is(err, recorder.ErrNotFound) {
			t.Fatalf("%s: Events(e1) error = %v, want ErrNotFound", name, err)
		}
		listT(t, st, recorder.Filter{GroupID: "g1"}, []string{"e3"})
		if all, _, _ := st.ListEpisodes(ctx, recorder.Filter{}); slices.Contains(IDs(all), "e1") {
			t.Fatalf("%s: deleted episode still listed", name)
		}
	}
	calls := ChatEpisode("e1", 2, 50) // the id can be used again
	Write(t, s, calls...)
	AssertCalls(t, Calls(t, s, "e1"), calls)
}

// testCallAfterFinish: a store may let go of an episode's dedup state when
// the episode is stored as finished; a call of it written afterwards (a
// record that was still queued when the finish came) is stored and read
// back exactly, and the episode stays finished.
func testCallAfterFinish(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := context.Background()
	calls := ChatEpisode("ep", 5, 2000)
	for _, c := range calls[:4] {
		Write(t, s, c)
	}
	finished := Epoch.Add(time.Minute)
	ep := recorder.Episode{ID: "ep", CreatedAt: Epoch, Status: recorder.StatusSuccess, FinishedAt: &finished}
	if err := s.PutEpisode(ctx, &ep); err != nil {
		t.Fatal(err)
	}
	Write(t, s, calls[4])
	Write(t, s, calls[3], calls[4]) // replays stay idempotent
	AssertCalls(t, Calls(t, s, "ep"), calls)
	sum, err := s.Episode(ctx, "ep")
	if err != nil || sum.Calls != 5 || sum.Status != recorder.StatusSuccess {
		t.Fatalf("Episode = %+v, %v; want 5 calls, status success", sum, err)
	}
}
