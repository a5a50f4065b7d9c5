package reconstruct

import (
	"fmt"
	"sync"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// Export must be linear: doubling an episode's turns at most about doubles the
// reconstruction time. Tests here may not time anything, so the tests in
// this file count work instead: the steps placing calls in segments takes
// (Stats.threadOps), per stored byte of the episode (Stats.Bytes). The
// lineage package, which classifies the calls, tests its own work.

// linearTurns are the episode lengths compared, each twice the last.
// Stored bytes grow about 3.5x per doubling (each call resends the
// history), so 400 turns (20-30 MB an episode) would make this test slow
// under -race; it passes there too.
var linearTurns = []int{25, 50, 100, 200}

// linearEpisodes caches linearEpisode per API and length: the tests of
// this file share them.
var linearEpisodes sync.Map // "api/turns" -> []*recorder.Call

// linearEpisode records an agent episode of turns calls whose history
// grows to about 20 KB (the benchmark workload), with a two-call subagent
// every 25 turns so that forks are threaded too.
func linearEpisode(api recorder.API, turns int) []*recorder.Call {
	s := newSim(api, fmt.Sprintf("lin-%s-%d", api, turns), uint64(turns), false)
	s.bodyPad = 20 * 1024 / (2 * turns)
	th := s.newThread("You are an agent.", "bash")
	s.user(th, "do the task")
	for i := range turns {
		if i%25 == 24 && api != apiCompletions {
			sub := s.newThread("You are a subagent.", "bash")
			s.user(sub, fmt.Sprintf("look into part %d", i))
			r := s.reply(1, "")
			s.call(sub, r)
			s.results(sub, r)
			s.call(sub, s.reply(0, "found it"))
		}
		r := s.reply(1, "")
		if i == turns-1 {
			r = s.reply(0, "done")
		}
		s.call(th, r)
		s.results(th, r)
	}
	return s.calls
}

// workSample is the work done on one episode and the bytes it stored.
type workSample struct {
	turns int
	work  int
	bytes int64
}

// checkLinear reports an error unless doubling turns at most about
// doubles the work (<= 2.3x) and the work per stored byte stays flat
// (<= 1.15x from one size to the next).
func checkLinear(samples []workSample) error {
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		growth := float64(b.work) / float64(a.work)
		perByte := (float64(b.work) / float64(b.bytes)) / (float64(a.work) / float64(a.bytes))
		if growth > 2.3 || perByte > 1.15 {
			return fmt.Errorf("turns %d -> %d: work %d -> %d (x%.2f, want <= 2.3), per stored byte x%.2f (want <= 1.15)",
				a.turns, b.turns, a.work, b.work, growth, perByte)
		}
	}
	return nil
}

// measure reconstructs an episode of each length in linearTurns and
// returns work(calls) with the bytes stored.
func measure(t *testing.T, api recorder.API, work func([]*callState, *Stats) int) []workSample {
	t.Helper()
	var out []workSample
	for _, turns := range linearTurns {
		key := fmt.Sprintf("%s/%d", api, turns)
		v, ok := linearEpisodes.Load(key)
		if !ok {
			v, _ = linearEpisodes.LoadOrStore(key, linearEpisode(api, turns))
		}
		calls := v.([]*recorder.Call)
		st := newStats()
		e := newEpisode(recorder.EpisodeSummary{Episode: recorderEpisode("lin")}, calls, DriftSplit, &st)
		if st.Calls != len(calls) || len(e.segs) == 0 {
			t.Fatalf("%s turns=%d: %d calls read, %d segments", api, turns, st.Calls, len(e.segs))
		}
		if want := 1 + turns/25; api != apiCompletions && len(e.segs) != want {
			t.Fatalf("%s turns=%d: %d segments, want %d (one per subagent plus the main thread)", api, turns, len(e.segs), want)
		}
		out = append(out, workSample{turns: turns, work: work(e.calls, &st), bytes: st.Bytes})
	}
	return out
}

func TestThreadingLinear(t *testing.T) {
	for _, api := range []recorder.API{apiChat, apiMessages, apiResponses, apiCompletions} {
		t.Run(string(api), func(t *testing.T) {
			samples := measure(t, api, func(_ []*callState, st *Stats) int { return st.threadOps })
			for _, s := range samples {
				t.Logf("turns=%d threading ops=%d stored=%d B (%.1f ops/KB)", s.turns, s.work, s.bytes, 1024*float64(s.work)/float64(s.bytes))
			}
			if err := checkLinear(samples); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestThreadingLinearCanFail shows that checkLinear catches quadratic
// threading: comparing each prompt with every earlier prompt message by
// message, the approach the lineage package's hash chains replace, fails
// it on the same episodes.
func TestThreadingLinearCanFail(t *testing.T) {
	samples := measure(t, apiChat, func(calls []*callState, _ *Stats) int { return quadraticOps(calls) })
	if err := checkLinear(samples); err == nil {
		t.Fatalf("quadratic reference passed the linearity check: %+v", samples)
	} else {
		t.Logf("quadratic reference fails as it should: %v", err)
	}
}

// quadraticOps counts the element comparisons of naive threading: each
// call's prompt compared with every earlier call's, element by element,
// up to their first difference.
func quadraticOps(calls []*callState) int {
	ops := 0
	for i, cs := range calls {
		for _, prev := range calls[:i] {
			for k := 0; k < len(cs.els.raw) && k < len(prev.els.raw); k++ {
				ops++
				if string(cs.els.raw[k]) != string(prev.els.raw[k]) {
					break
				}
			}
		}
	}
	return ops
}
