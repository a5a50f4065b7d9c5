package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/internal/redistest"
)

// TestStorageSize is the storage target: a 200-turn
// episode whose request grows to ~100 KB stores less than 1.5x its final
// request. It measures the bytes Redis holds for the episode (the sum of
// frame, call id and state lengths) and logs Redis's own MEMORY USAGE,
// which adds allocator and structure overhead (about 0.2x here, mostly the
// hashtable of the call id set).
func TestStorageSize(t *testing.T) {
	url := redistest.URL(t)
	s := openT(t, url, Options{})
	calls := chatEpisode("ep-long", 200, 500)
	for _, c := range calls {
		writeT(t, s, c)
	}
	final := len(calls[len(calls)-1].Request)
	if final < 95_000 {
		t.Fatalf("final request is %d bytes, want ~100 KB", final)
	}
	payload, memory := storedBytes(t, s, "ep-long")
	t.Logf("200 turns, final request %d B: payload %d B (%.2fx), MEMORY USAGE %d B (%.2fx)",
		final, payload, float64(payload)/float64(final), memory, float64(memory)/float64(final))
	if payload >= int64(final)*3/2 {
		t.Fatalf("stored %d bytes, want < %d (1.5x the final request)", payload, final*3/2)
	}
	assertCalls(t, callsT(t, twin(t, url, s), "ep-long"), calls)

	// Without dedup the same episode costs O(turns²).
	nd := openT(t, url, Options{NoDedup: true})
	for _, c := range calls[:50] {
		writeT(t, nd, c)
	}
	ndPayload, _ := storedBytes(t, nd, "ep-long")
	t.Logf("without dedup, the first 50 turns alone take %d B", ndPayload)
	assertCalls(t, callsT(t, nd, "ep-long"), calls[:50])
}

// TestRestart takes Redis away under a writing store: writes fail while it
// is down and succeed once it is back, with the data of before (Stop saves
// a snapshot) or, after a Kill, without it, in which case the store must
// notice that the episode is gone instead of naming lost calls as bases.
func TestRestart(t *testing.T) {
	srv := redistest.NewServer(t)
	s := openT(t, srv.URL(), Options{})
	ctx := context.Background()
	calls := chatEpisode("ep", 8, 300)
	writeT(t, s, calls[:3]...)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	err := s.WriteCalls(ctx, calls[3:4])
	t.Logf("WriteCalls with Redis stopped failed after %v: %v", time.Since(down), err)
	if err == nil {
		t.Fatal("WriteCalls succeeded with Redis stopped")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	writeT(t, s, calls[3:6]...) // the failed call again, and more
	assertCalls(t, callsT(t, s, "ep"), calls[:6])
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil { // loads the snapshot of Stop: calls 0-2 only
		t.Fatal(err)
	}
	writeT(t, s, calls[6:]...)
	writeT(t, s, calls[3:6]...)
	assertCalls(t, callsT(t, s, "ep"), calls)
}
