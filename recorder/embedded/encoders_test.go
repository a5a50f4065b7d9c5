package embedded

import (
	"context"
	"fmt"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

// TestEncoderBound: with more episodes written than MaxEncoders, dedup
// state stays bounded and an evicted episode written again still decodes
// exactly.
func TestEncoderBound(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSync: true, MaxEncoders: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeRoundRobin(t, s, func(_, _ int) {
		if n := len(s.encoders); n > 3 {
			t.Fatalf("%d encoders kept, bound is 3", n)
		}
	})
	// Every write after the first three finds its encoder let go.
	if st := s.DedupStats(); st.Episodes != 3 || st.Evictions != 17 || st.Bytes != s.encoderSum || st.Bytes == 0 {
		t.Fatalf("DedupStats %+v, want 3 episodes of %d bytes and 17 evictions", st, s.encoderSum)
	}
}

// writeRoundRobin writes the 4 turns of 5 episodes to s, turn by turn,
// calling check after each write, then holds every episode read back to
// what was written.
func writeRoundRobin(t *testing.T, s *Store, check func(turn, episode int)) {
	t.Helper()
	ctx := context.Background()
	episodes := map[string][]*recorder.Call{}
	for e := range 5 {
		ep := fmt.Sprintf("ep-%d", e)
		episodes[ep] = storetest.ChatEpisode(ep, 4, 2000)
	}
	for turn := range 4 {
		for e := range 5 {
			c := episodes[fmt.Sprintf("ep-%d", e)][turn]
			if err := s.WriteCalls(ctx, []*recorder.Call{c}); err != nil {
				t.Fatal(err)
			}
			check(turn, e)
		}
	}
	for ep, want := range episodes {
		got, err := s.Calls(ctx, ep)
		if err != nil {
			t.Fatal(err)
		}
		storetest.AssertCalls(t, got, want)
	}
}

// TestEncoderBytesBound: the encoders' estimated bytes stay within
// MaxEncoderBytes (the last one written always stays, however large), the
// running sum matches the encoders kept, and every episode still decodes
// exactly.
func TestEncoderBytesBound(t *testing.T) {
	probe := recorder.NewEpisodeEncoder(true)
	first := storetest.ChatEpisode("probe", 1, 2000)[0]
	if _, _, err := probe.Encode(first); err != nil {
		t.Fatal(err)
	}
	limit := 2*probe.Bytes() + probe.Bytes()/2 // two episodes' first calls fit, three do not
	s, err := Open(t.TempDir(), Options{NoSync: true, MaxEncoderBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeRoundRobin(t, s, func(turn, e int) {
		sum := 0
		for ep, enc := range s.encoders {
			if s.encoderSize[ep] != enc.Bytes() {
				t.Fatalf("%s: noted %d bytes, encoder has %d", ep, s.encoderSize[ep], enc.Bytes())
			}
			sum += enc.Bytes()
		}
		if sum != s.encoderSum || len(s.encoderSize) != len(s.encoders) {
			t.Fatalf("running sum %d over %d sizes; encoders hold %d over %d", s.encoderSum, len(s.encoderSize), sum, len(s.encoders))
		}
		if sum > limit && len(s.encoders) > 1 {
			t.Fatalf("%d encoders hold %d bytes, bound %d", len(s.encoders), sum, limit)
		}
		if turn == 0 && e >= 2 && len(s.encoders) != 2 {
			t.Fatalf("after %d first calls: %d encoders, want 2", e+1, len(s.encoders))
		}
	})
}

// TestFinishDropsEncoder: storing an episode as finished keeps its encoder
// for the calls still on their way (a rollout finishes as soon as its last
// response arrived, before that call's record is written), so the late call
// is encoded without a rebuild; once recorder.FinishGrace calls have been
// written since the finish, the encoder and its bytes go, and only its; a
// running episode's stays.
func TestFinishDropsEncoder(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	a := storetest.ChatEpisode("a", 3, 500)
	storetest.Write(t, s, a[:2]...)
	storetest.Write(t, s, storetest.ChatEpisode("b", 2, 500)...)
	if err := s.PutEpisode(ctx, &recorder.Episode{ID: "b", Status: recorder.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutEpisode(ctx, &recorder.Episode{ID: "a", Status: recorder.StatusSuccess}); err != nil {
		t.Fatal(err)
	}
	enc := s.encoders["a"]
	storetest.Write(t, s, a[2]) // the late call
	if enc == nil || s.encoders["a"] != enc {
		t.Fatalf("a's late call: encoder %p before, %p after; want the same one, not rebuilt", enc, s.encoders["a"])
	}
	for i := range recorder.FinishGrace - 2 { // with the late call, one short of the grace
		storetest.Write(t, s, storetest.ChatEpisode(fmt.Sprintf("c%d", i), 1, 100)...)
	}
	if s.encoders["a"] != enc {
		t.Fatalf("a's encoder gone %d calls after its finish, before the grace of %d", recorder.FinishGrace-1, recorder.FinishGrace)
	}
	storetest.Write(t, s, storetest.ChatEpisode("last", 1, 100)...)
	s.mu.Lock()
	sum := 0
	for ep := range s.encoders {
		sum += s.encoderSize[ep]
	}
	keptA, keptB, counted, waiting := s.encoders["a"] != nil, s.encoders["b"] != nil, s.encoderSum, s.finished.Len()
	s.mu.Unlock()
	if keptA || !keptB || counted != sum || waiting != 0 {
		t.Fatalf("after the grace: a's kept %v, b's %v, sum %d of %d counted, %d finished waiting; want b's only, sums equal, none waiting",
			keptA, keptB, counted, sum, waiting)
	}
	got, err := s.Calls(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	storetest.AssertCalls(t, got, a)
}

// TestIdleEncoderCompacts: an episode that goes MaxEncoders writes without
// a call has its encoder compacted (less memory, counted), a running one
// keeps its state whole, and the quiet episode's next call is encoded by
// the same encoder, without a rebuild, and reads back exactly.
func TestIdleEncoderCompacts(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSync: true, MaxEncoders: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	quiet, busy := storetest.ChatEpisode("quiet", 4, 2000), storetest.ChatEpisode("busy", 10, 2000)
	for _, c := range quiet[:3] {
		storetest.Write(t, s, c)
	}
	enc, whole := s.encoders["quiet"], s.encoderSize["quiet"]
	for i, c := range busy {
		storetest.Write(t, s, c)
		if st := s.DedupStats(); i < 7 && st.Compactions != 0 {
			t.Fatalf("compacted after %d writes of another episode, bound 8", i+1)
		}
	}
	st := s.DedupStats()
	if st.Compactions != 1 || s.encoderSize["quiet"] >= whole/2 || st.Bytes != s.encoderSize["quiet"]+s.encoderSize["busy"] {
		t.Fatalf("after 10 writes of another episode: %+v, quiet's encoder %d bytes (%d before); want 1 compaction, under half, sums equal",
			st, s.encoderSize["quiet"], whole)
	}
	storetest.Write(t, s, quiet[3])
	if s.encoders["quiet"] != enc || s.DedupStats().Rebuilds != 0 {
		t.Fatalf("quiet's next call rebuilt its encoder (%d rebuilds)", s.DedupStats().Rebuilds)
	}
	got, err := s.Calls(context.Background(), "quiet")
	if err != nil {
		t.Fatal(err)
	}
	storetest.AssertCalls(t, got, quiet)
}
