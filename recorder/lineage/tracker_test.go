package lineage

import (
	"fmt"
	"sync"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

func inEpisode(ep string, c *recorder.Call) *recorder.Call {
	c.EpisodeID = ep
	return c
}

func TestObserveSkips(t *testing.T) {
	tr := NewTracker(Options{})
	if l, ok := tr.Observe(nil); ok || l != (recorder.Lineage{}) {
		t.Errorf("Observe(nil) = %+v, %v, want zero, false", l, ok)
	}
	for _, api := range []string{recorder.APICountTokens, recorder.APIEmbeddings, recorder.APIModels, ""} {
		c := tokCall("x", seq(0, 10), nil)
		c.API = api
		if l, ok := tr.Observe(c); ok || l != (recorder.Lineage{}) {
			t.Errorf("Observe(api %q) = %+v, %v, want zero, false", api, l, ok)
		}
	}
	if l, _ := tr.Observe(tokCall("c1", seq(0, 10), nil)); l.Kind != recorder.LineageRoot {
		t.Errorf("first generation call = %s, want root", l.Kind)
	}
}

func TestObserveReplay(t *testing.T) {
	tr := NewTracker(Options{})
	c1, c2 := tokCall("c1", seq(0, 10), seq(10, 2)), tokCall("c2", seq(0, 14), nil)
	first, _ := tr.Observe(c1)
	second, _ := tr.Observe(c2)
	for _, tc := range []struct {
		c    *recorder.Call
		want recorder.Lineage
	}{{c1, first}, {c2, second}, {c1, first}} {
		if l, ok := tr.Observe(tc.c); !ok || l != tc.want {
			t.Errorf("Observe(%s) again = %+v, %v, want %+v", tc.c.CallID, l, ok, tc.want)
		}
	}
	if l, _ := tr.Observe(tokCall("c3", seq(0, 14), nil)); l.Kind != recorder.LineageRetry || l.ParentCallID != "c2" {
		t.Errorf("after replays: %+v, want a retry of c2", l)
	}
}

func TestObserveWithoutData(t *testing.T) {
	// No token ids and a request that is not JSON: still a kind, never root
	// after the first call.
	tr := NewTracker(Options{})
	for i, want := range []string{recorder.LineageRoot, recorder.LineageFork} {
		c := &recorder.Call{EpisodeID: "e", CallID: fmt.Sprint(i), API: recorder.APIMessages, Request: []byte(`"raw"`), RequestRaw: true}
		if l, ok := tr.Observe(c); !ok || l.Kind != want {
			t.Errorf("call %d = %+v, %v, want %s", i, l, ok, want)
		}
	}
}

// oneEpisodeBytes is what the first call of tokCall("a1", seq(0, 10),
// seq(10, 5)) costs a Tracker.
func oneEpisodeBytes() int64 {
	tr := NewTracker(Options{})
	tr.Observe(inEpisode("a", tokCall("a1", seq(0, 10), seq(10, 5))))
	return tr.Bytes()
}

func TestMaxBytes(t *testing.T) {
	tr := NewTracker(Options{MaxBytes: 2*oneEpisodeBytes() + 100})
	first := func(ep string) { tr.Observe(inEpisode(ep, tokCall(ep+"1", seq(0, 10), seq(10, 5)))) }
	second := func(ep string) string {
		l, _ := tr.Observe(inEpisode(ep, tokCall(ep+"2", seq(0, 20), nil)))
		return l.Kind
	}
	first("a")
	first("b")
	first("c") // evicts a, the least recently observed
	if n := tr.Len(); n != 2 {
		t.Fatalf("Len = %d, want 2", n)
	}
	if k := second("b"); k != recorder.LineageExtend {
		t.Errorf("kept episode b: %s, want extend", k)
	}
	if k := second("a"); k != recorder.LineageRoot {
		t.Errorf("evicted episode a: %s, want root", k)
	}
	tr.Forget("a")
	tr.Forget("nope")
	if k := second("a"); k != recorder.LineageRoot {
		t.Errorf("forgotten episode a: %s, want root", k)
	}
}

// TestMaxBytesCountsTokens checks that the budget is in bytes: one long
// episode pushes out several short ones, is kept alone although it exceeds
// the budget, and forgetting everything brings the estimate back to 0.
func TestMaxBytesCountsTokens(t *testing.T) {
	one := oneEpisodeBytes()
	tr := NewTracker(Options{MaxBytes: 4 * one})
	for _, ep := range []string{"a", "b", "c"} {
		tr.Observe(inEpisode(ep, tokCall(ep+"1", seq(0, 10), seq(10, 5))))
	}
	if n, b := tr.Len(), tr.Bytes(); n != 3 || b != 3*one {
		t.Fatalf("three short episodes: Len = %d, Bytes = %d, want 3, %d", n, b, 3*one)
	}
	tr.Observe(inEpisode("long", tokCall("l1", seq(0, 10000), seq(20000, 100))))
	if n, b := tr.Len(), tr.Bytes(); n != 1 || b < 4*10100 {
		t.Errorf("after a 10,100-token episode: Len = %d, Bytes = %d, want 1, at least %d", n, b, 4*10100)
	}
	if l, _ := tr.Observe(inEpisode("long", tokCall("l2", cat(seq(0, 10000), seq(20000, 100), seq(30000, 50)), nil))); l.Kind != recorder.LineageExtend {
		t.Errorf("the long episode's next call: %s, want extend", l.Kind)
	}
	tr.Forget("long")
	if n, b := tr.Len(), tr.Bytes(); n != 0 || b != 0 {
		t.Errorf("after Forget: Len = %d, Bytes = %d, want 0, 0", n, b)
	}
}

func TestObserveKeepsNoReferences(t *testing.T) {
	tr := NewTracker(Options{})
	c1 := tokCall("c1", seq(0, 200), seq(500, 10))
	want := cat(seq(0, 200), seq(500, 10), seq(900, 5))
	tr.Observe(c1)
	clear(c1.Tokens.PromptIDs) // the caller reuses its buffers
	clear(c1.Tokens.CompletionIDs)
	if l, _ := tr.Observe(tokCall("c2", want, nil)); l.Kind != recorder.LineageExtend || l.CommonPrefixTokens != 210 {
		t.Errorf("after the caller reused its slices: %+v, want extend of 210 ids", l)
	}
}

// TestConcurrent observes many episodes from many goroutines, and one
// episode from several at once, under -race.
func TestConcurrent(t *testing.T) {
	tr := NewTracker(Options{MaxBytes: 1 << 20})
	var wg sync.WaitGroup
	kinds := make([][]string, 8)
	for g := range 8 {
		wg.Go(func() {
			ep := fmt.Sprintf("ep%d", g)
			p := seq(0, 100)
			for i := range 30 {
				out := seq(1000*(i+1), 7)
				l, _ := tr.Observe(inEpisode(ep, tokCall(fmt.Sprint(i), p, out)))
				kinds[g] = append(kinds[g], l.Kind)
				p = cat(p, out, seq(50000+i, 3))
			}
		})
	}
	for g := range 4 {
		wg.Go(func() {
			for i := range 30 {
				tr.Observe(inEpisode("shared", tokCall(fmt.Sprintf("%d-%d", g, i), seq(0, 80+i), seq(7, 3))))
			}
		})
	}
	wg.Wait()
	for g, ks := range kinds {
		for i, k := range ks {
			want := recorder.LineageExtend
			if i == 0 {
				want = recorder.LineageRoot
			}
			if k != want {
				t.Errorf("ep%d call %d = %s, want %s", g, i, k, want)
			}
		}
	}
}

// TestWorkIsLinear counts the units hashed and compared while observing
// long episodes: the total stays within a constant factor of the units the
// calls carry (plus a block per call), however many turns there are.
func TestWorkIsLinear(t *testing.T) {
	for _, turns := range []int{50, 300} {
		calls := tokenEpisode(turns, 2000)
		e := newEpisode("e")
		units := 0
		for _, c := range calls {
			e.observeLocked(c)
			units += len(c.Tokens.PromptIDs) + len(c.Tokens.CompletionIDs)
		}
		if limit := int64(2*units + 3*blockSize*len(calls)); e.tok.work > limit {
			t.Errorf("%d turns: work %d, want <= %d for %d units", turns, e.tok.work, limit, units)
		}
	}
}
