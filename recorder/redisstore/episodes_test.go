package redisstore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

func ids(sums []recorder.EpisodeSummary) []string { return storetest.IDs(sums) }

// testIndexMoves checks that the index sets follow an episode's changes
// exactly: no member is left behind in a set it no longer belongs to.
func testIndexMoves(t *testing.T, url string) {
	s := openT(t, url, Options{})
	ctx := context.Background()
	ep := recorder.Episode{ID: "e", TaskID: "t1", GroupID: "g1", CreatedAt: epoch}
	if err := s.PutEpisode(ctx, &ep); err != nil {
		t.Fatal(err)
	}
	writeT(t, s, chatEpisode("calls-only", 2, 50)...)
	ep.TaskID, ep.GroupID, ep.Status, ep.CreatedAt = "t2", "", recorder.StatusFailure, epoch.Add(time.Hour)
	if err := s.PutEpisode(ctx, &ep); err != nil {
		t.Fatal(err)
	}
	early := chatEpisode("calls-only", 1, 50)[0]
	early.CallID, early.StartedAt = "early", epoch.Add(-time.Hour)
	writeT(t, twin(t, url, s), early) // another replica moves calls-only
	for key, want := range map[string]int64{
		s.keys.all(): 2, s.keys.filter("task", "t1"): 0, s.keys.filter("group", "g1"): 0,
		s.keys.filter("task", "t2"): 1, s.keys.filter("status", recorder.StatusRunning): 1,
		s.keys.filter("status", recorder.StatusFailure): 1,
	} {
		if n := s.rdb.ZCard(ctx, key).Val(); n != want {
			t.Errorf("ZCARD %s = %d, want %d", key, n, want)
		}
	}
	got, _, err := s.ListEpisodes(ctx, recorder.Filter{})
	if err != nil || !slices.Equal(ids(got), []string{"calls-only", "e"}) || !got[0].CreatedAt.Equal(early.StartedAt) {
		t.Fatalf("ListEpisodes = %v, %v; want [calls-only e], calls-only created at its early call", ids(got), err)
	}
}

func testRetention(t *testing.T, url string) {
	const retention = 168 * time.Hour
	s := openT(t, url, Options{Retention: retention})
	ctx := context.Background()
	calls := chatEpisode("ep", 3, 100)
	writeT(t, s, calls...)
	if _, err := s.AppendEvent(ctx, &recorder.Event{EpisodeID: "ep", Type: "x"}); err != nil {
		t.Fatal(err)
	}
	ek := s.keys.episode("ep")
	for _, k := range ek.all() {
		if ttl := s.rdb.PTTL(ctx, k).Val(); ttl != -1 {
			t.Fatalf("running episode key %s has TTL %v, want none", k, ttl)
		}
	}
	done := epoch.Add(time.Hour)
	if err := s.PutEpisode(ctx, &recorder.Episode{ID: "ep", Status: recorder.StatusSuccess, FinishedAt: &done}); err != nil {
		t.Fatal(err)
	}
	late := chatEpisode("ep", 4, 100)[3] // a call that ends after the finish expires with the episode
	writeT(t, s, late)
	for _, k := range ek.all() {
		if ttl := s.rdb.PTTL(ctx, k).Val(); ttl <= retention-time.Minute || ttl > retention {
			t.Fatalf("finished episode key %s has TTL %v, want about %v", k, ttl, retention)
		}
	}
	// Expiry deletes the keys; the index entry goes at the next listing.
	if err := s.rdb.Del(ctx, ek.all()...).Err(); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.ListEpisodes(ctx, recorder.Filter{}); err != nil || len(got) != 0 {
		t.Fatalf("ListEpisodes after expiry = %v, %v; want none", ids(got), err)
	}
	if n := s.rdb.HLen(ctx, s.keys.entries()).Val() + s.rdb.ZCard(ctx, s.keys.all()).Val() + s.rdb.ZCard(ctx, s.keys.finished()).Val(); n != 0 {
		t.Fatalf("index keeps %d entries of the expired episode, want 0", n)
	}
	if err := s.PutEpisode(ctx, &recorder.Episode{ID: "ep2", Status: recorder.StatusSuccess, FinishedAt: &done}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutEpisode(ctx, &recorder.Episode{ID: "ep2", Status: recorder.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	if ttl := s.rdb.PTTL(ctx, s.keys.episode("ep2").ep).Val(); ttl != -1 {
		t.Fatalf("re-opened episode has TTL %v, want none", ttl)
	}
}

func testGC(t *testing.T, url string) {
	s := openT(t, url, Options{})
	ctx := context.Background()
	now := time.Now().UTC()
	old, recent := now.Add(-200*time.Hour), now.Add(-time.Hour)
	for _, ep := range []recorder.Episode{
		{ID: "old1", Status: recorder.StatusSuccess, FinishedAt: &old},
		{ID: "old2", Status: recorder.StatusFailure, FinishedAt: &old, GroupID: "g"},
		{ID: "recent", Status: recorder.StatusSuccess, FinishedAt: &recent},
		{ID: "running", GroupID: "g"},
	} {
		if err := s.PutEpisode(ctx, &ep); err != nil {
			t.Fatal(err)
		}
		writeT(t, s, chatEpisode(ep.ID, 2, 50)...)
	}
	n, err := s.GC(ctx, 168*time.Hour)
	if err != nil || n != 2 {
		t.Fatalf("GC(168h) = %d, %v; want 2", n, err)
	}
	got, _, err := s.ListEpisodes(ctx, recorder.Filter{})
	if want := []string{"recent", "running"}; err != nil || !slices.Equal(slices.Sorted(slices.Values(ids(got))), want) {
		t.Fatalf("after GC ListEpisodes = %v, %v; want %v", ids(got), err, want)
	}
	if _, err := s.Calls(ctx, "old1"); !errors.Is(err, recorder.ErrNotFound) {
		t.Fatalf("Calls(old1) after GC error = %v, want ErrNotFound", err)
	}
	if got, _, _ := s.ListEpisodes(ctx, recorder.Filter{GroupID: "g"}); !slices.Equal(ids(got), []string{"running"}) {
		t.Fatalf("group g after GC = %v, want [running]", ids(got))
	}
	if n, err := s.GC(ctx, 168*time.Hour); err != nil || n != 0 {
		t.Fatalf("second GC = %d, %v; want 0", n, err)
	}
	if n, err := s.GC(ctx, 0); err != nil || n != 1 {
		t.Fatalf("GC(0) = %d, %v; want 1 (recent)", n, err)
	}
}
