package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

// TestBackends runs the recorder.Store conformance suite and the Redis
// store's own semantics on a single Redis and on a 3-master Redis Cluster.
func TestBackends(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Run("Conformance", func(t *testing.T) {
				storetest.Run(t, storetest.Backend{
					Open: func(t *testing.T) recorder.Store { return openT(t, b.url, Options{}) },
					// A replica: a store that wrote nothing, on the same data.
					Reopen: func(t *testing.T, s recorder.Store) recorder.Store { return twin(t, b.url, s.(*Store)) },
				})
			})
			for _, tc := range []struct {
				name string
				fn   func(t *testing.T, url string)
			}{
				{"ReplayStoresNothing", testReplayStoresNothing},
				{"TwoReplicas", testTwoReplicas},
				{"ConcurrentReplicas", testConcurrentReplicas},
				{"EncoderBytes", testEncoderBytes},
				{"EncoderEvictions", testEncoderEvictions},
				{"IdleEncoderCompacts", testIdleEncoderCompacts},
				{"FinishDropsEncoder", testFinishDropsEncoder},
				{"DeleteUnderReplica", testDeleteUnderReplica},
				{"IndexMoves", testIndexMoves},
				{"Retention", testRetention},
				{"GC", testGC},
			} {
				t.Run(tc.name, func(t *testing.T) { tc.fn(t, b.url) })
			}
		})
	}
}

func testReplayStoresNothing(t *testing.T, url string) {
	s := openT(t, url, Options{})
	calls := chatEpisode("ep", 5, 200)
	writeT(t, s, calls[0], calls[1], calls[0])
	size, _ := storedBytes(t, s, "ep")
	writeT(t, s, calls[1], calls[0])
	writeT(t, twin(t, url, s), calls[0])
	if got, _ := storedBytes(t, s, "ep"); got != size {
		t.Fatalf("replays grew the episode from %d to %d bytes", size, got)
	}
	if n := s.rdb.LLen(context.Background(), s.keys.episode("ep").log).Val(); n != 2 {
		t.Fatalf("log holds %d frames, want 2", n)
	}
}

// testTwoReplicas has two stores (two proxy replicas) write alternate calls
// of one episode, as a load balancer without affinity would send them.
func testTwoReplicas(t *testing.T, url string) {
	a := openT(t, url, Options{})
	b := twin(t, url, a)
	calls := chatEpisode("ep", 40, 400)
	for i, c := range calls {
		writeT(t, []*Store{a, b}[i%2], c)
	}
	assertCalls(t, callsT(t, a, "ep"), calls)
	assertCalls(t, callsT(t, b, "ep"), calls)
	// Each replica resends what the other stored since its last call
	// (about one turn), never the whole history.
	payload, _ := storedBytes(t, a, "ep")
	t.Logf("two replicas, 40 turns: stored %d B for a final request of %d B", payload, len(calls[len(calls)-1].Request))
	if final := len(calls[len(calls)-1].Request); payload > int64(final)*3 {
		t.Fatalf("two replicas stored %d bytes for a final request of %d, want < 3x", payload, final)
	}
}

// testConcurrentReplicas writes the calls of several episodes from many
// goroutines over two stores at once, with fewer encoders than episodes.
func testConcurrentReplicas(t *testing.T, url string) {
	a := openT(t, url, Options{MaxEncoders: 3})
	b := twin(t, url, a)
	eps := map[string][]*recorder.Call{}
	for _, ep := range []string{"c1", "c2", "c3", "c4", "c5"} {
		eps[ep] = chatEpisode(ep, 12, 300)
	}
	goWrite(t, 8, func(w int) error {
		st := []*Store{a, b}[w%2]
		for turn := range 12 {
			if turn%4 != w%4 {
				continue
			}
			for _, calls := range eps {
				if err := st.WriteCalls(context.Background(), []*recorder.Call{calls[turn]}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	for ep, calls := range eps {
		assertCalls(t, callsT(t, a, ep), calls)
	}
	if n := a.encs.len(); n > 3 {
		t.Fatalf("store keeps %d encoders, want at most MaxEncoders=3", n)
	}
}

// testDeleteUnderReplica deletes an episode through one replica while
// another holds dedup state for it: the other must notice and start afresh
// instead of naming deleted calls as bases.
func testDeleteUnderReplica(t *testing.T, url string) {
	a := openT(t, url, Options{})
	b := twin(t, url, a)
	ctx := context.Background()
	calls := chatEpisode("ep", 6, 300)
	writeT(t, b, calls[:3]...)
	if err := a.DeleteEpisode(ctx, "ep"); err != nil {
		t.Fatal(err)
	}
	writeT(t, b, calls[3])
	assertCalls(t, callsT(t, a, "ep"), calls[3:4])
	writeT(t, a, calls[4]) // a has no state: it observes what b stored
	writeT(t, b, calls[5])
	assertCalls(t, callsT(t, b, "ep"), calls[3:])
}

// len returns how many entries are cached.
// testEncoderBytes: with MaxEncoderBytes below one encoder's state, only
// the last episode written keeps one (its sum counted exactly), and every
// episode written concurrently still reads back exactly.
func testEncoderBytes(t *testing.T, url string) {
	a := openT(t, url, Options{MaxEncoderBytes: 1})
	ids := []string{"b1", "b2", "b3"}
	eps := map[string][]*recorder.Call{}
	for _, ep := range ids {
		eps[ep] = chatEpisode(ep, 6, 300)
	}
	goWrite(t, len(ids), func(w int) error {
		for _, c := range eps[ids[w]] {
			if err := a.WriteCalls(context.Background(), []*recorder.Call{c}); err != nil {
				return err
			}
		}
		return nil
	})
	for ep, calls := range eps {
		assertCalls(t, callsT(t, a, ep), calls)
	}
	st := a.DedupStats()
	a.encs.mu.Lock()
	defer a.encs.mu.Unlock()
	sum := 0
	for el := a.encs.lru.Front(); el != nil; el = el.Next() {
		sum += el.Value.(*episodeEncoder).size
	}
	if a.encs.lru.Len() != 1 || sum != a.encs.bytes || sum == 0 {
		t.Fatalf("%d encoders holding %d bytes (counted %d), want 1 with its size counted", a.encs.lru.Len(), sum, a.encs.bytes)
	}
	// Each episode's encoder was let go at least once for another's.
	if st.Episodes != 1 || st.Bytes != sum || st.Evictions < 2 {
		t.Fatalf("DedupStats %+v, want 1 episode of %d bytes and at least 2 evictions", st, sum)
	}
}

// testEncoderEvictions writes five episodes turn by turn through a store
// that keeps three encoders: every write after the first three finds its
// encoder let go, and DedupStats counts each.
func testEncoderEvictions(t *testing.T, url string) {
	a := openT(t, url, Options{MaxEncoders: 3})
	eps := make([][]*recorder.Call, 5)
	for e := range eps {
		eps[e] = chatEpisode(fmt.Sprintf("ev%d", e), 4, 300)
	}
	for turn := range 4 {
		for e := range eps {
			writeT(t, a, eps[e][turn])
		}
	}
	for _, calls := range eps {
		assertCalls(t, callsT(t, a, calls[0].EpisodeID), calls)
	}
	if st := a.DedupStats(); st.Episodes != 3 || st.Evictions != 17 || st.Bytes == 0 {
		t.Fatalf("DedupStats %+v, want 3 episodes and 17 evictions", st)
	}
}

// testIdleEncoderCompacts: an episode that goes MaxEncoders writes without
// a call has its encoder compacted (less memory, counted), a running one
// keeps its state whole, and the quiet episode's next call is encoded
// without a rebuild and reads back exactly.
func testIdleEncoderCompacts(t *testing.T, url string) {
	a := openT(t, url, Options{MaxEncoders: 8})
	quiet, busy := chatEpisode("quiet", 4, 2000), chatEpisode("busy", 10, 2000)
	for _, c := range quiet[:3] {
		writeT(t, a, c)
	}
	size := func(ep string) int {
		a.encs.mu.Lock()
		defer a.encs.mu.Unlock()
		return a.encs.m[ep].Value.(*episodeEncoder).size
	}
	whole := size("quiet")
	for i, c := range busy {
		writeT(t, a, c)
		if st := a.DedupStats(); i < 7 && st.Compactions != 0 {
			t.Fatalf("compacted after %d writes of another episode, bound 8", i+1)
		}
	}
	st := a.DedupStats()
	if st.Compactions != 1 || size("quiet") >= whole/2 || st.Bytes != size("quiet")+size("busy") {
		t.Fatalf("after 10 writes of another episode: %+v, quiet's encoder %d bytes (%d before); want 1 compaction, under half, sums equal",
			st, size("quiet"), whole)
	}
	writeT(t, a, quiet[3])
	if n := a.DedupStats().Rebuilds; n != 0 {
		t.Fatalf("quiet's next call rebuilt its encoder (%d rebuilds)", n)
	}
	assertCalls(t, callsT(t, a, "quiet"), quiet)
}

// goWrite runs write(0..n-1) on n goroutines and fails t with their errors.
func goWrite(t *testing.T, n int, write func(w int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range n {
		wg.Go(func() {
			if err := write(w); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func (c *encoders) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// testFinishDropsEncoder: storing an episode as finished keeps this
// client's encoder for it while calls may still be on their way, so a late
// call is encoded without a rebuild, and drops it, and only it, once
// recorder.FinishGrace calls have been written since; a running episode's
// stays.
func testFinishDropsEncoder(t *testing.T, url string) {
	s := openT(t, url, Options{})
	ctx := context.Background()
	a := storetest.ChatEpisode("a", 3, 500)
	storetest.Write(t, s, a[:2]...)
	storetest.Write(t, s, storetest.ChatEpisode("b", 2, 500)...)
	if err := s.PutEpisode(ctx, &recorder.Episode{ID: "b", Status: recorder.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutEpisode(ctx, &recorder.Episode{ID: "a", Status: recorder.StatusFailure}); err != nil {
		t.Fatal(err)
	}
	before := s.encs.encoderOf("a")
	storetest.Write(t, s, a[2]) // the late call
	if before == nil || s.encs.encoderOf("a") != before {
		t.Fatalf("a's late call: encoder %p before, %p after; want the same one, not rebuilt", before, s.encs.encoderOf("a"))
	}
	var others []*recorder.Call
	for i := range recorder.FinishGrace - 2 { // with the late call, one short of the grace
		others = append(others, storetest.ChatEpisode(fmt.Sprintf("c%d", i), 1, 100)...)
	}
	storetest.Write(t, s, others...)
	if s.encs.encoderOf("a") != before {
		t.Fatalf("a's encoder gone %d calls after its finish, before the grace of %d", recorder.FinishGrace-1, recorder.FinishGrace)
	}
	storetest.Write(t, s, storetest.ChatEpisode("last", 1, 100)...)
	s.encs.mu.Lock()
	_, kept := s.encs.m["a"]
	_, keptB := s.encs.m["b"]
	sum := 0
	for el := s.encs.lru.Front(); el != nil; el = el.Next() {
		sum += el.Value.(*episodeEncoder).size
	}
	bytes, waiting := s.encs.bytes, s.encs.finished.Len()
	s.encs.mu.Unlock()
	if kept || !keptB || bytes != sum || waiting != 0 {
		t.Fatalf("after the grace: a kept %v, b kept %v, %d bytes counted of %d, %d finished waiting; want b only, sums equal, none waiting", kept, keptB, bytes, sum, waiting)
	}
	got, err := s.Calls(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	storetest.AssertCalls(t, got, a)
}

// encoderOf returns the episode's encoder, nil if it has none.
func (c *encoders) encoderOf(id string) *recorder.EpisodeEncoder {
	c.mu.Lock()
	el := c.m[id]
	c.mu.Unlock()
	if el == nil {
		return nil
	}
	e := el.Value.(*episodeEncoder)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.enc
}
