package plan

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// The simulation compares three ways of spending the same rollout budget
// on a pool of tasks with known pass rates: uniform allocation (every
// task in turn gets one group of n), Orchard's released rule (below), and
// the planner. An informative group is one of n rollouts with both
// outcomes; wasted rollouts are those in no emitted informative group.
const (
	simTasks  = 200
	simN      = 4
	simNMax   = 8
	simBudget = 3840
	simBatch  = 32
	simSeeds  = 12
)

// simRates draws the pool's pass rates from Beta(0.5, 0.5), the arcsine
// law: sin^2(pi u / 2) for uniform u. Most tasks are nearly always or
// nearly never solved, as in real RL task pools.
func simRates(seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	ps := make([]float64, simTasks)
	for i := range ps {
		s := math.Sin(math.Pi * rng.Float64() / 2)
		ps[i] = s * s
	}
	return ps
}

// bern draws the outcome of one rollout.
func bern(rng *rand.Rand, p float64) bool { return rng.Float64() < p }

// simUniform gives every task in turn (shuffled epochs) one group of n.
func simUniform(ps []float64, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 2))
	groups := 0
	for spent := 0; spent+simN <= simBudget; {
		for _, i := range rng.Perm(len(ps)) {
			if spent+simN > simBudget {
				break
			}
			pos := 0
			for range simN {
				if bern(rng, ps[i]) {
					pos++
				}
			}
			spent += simN
			if pos > 0 && pos < simN {
				groups++
			}
		}
	}
	return groups
}

// simOrchard is Orchard's released progressive rule (MSR-Orchard/slime,
// slime/rollout/sglang_rollout.py, progressive_generate_and_rm_group and
// _try_select_training_group), for binary rewards: each task in turn is
// sampled in fixed strides of n up to n_max; after each stride a group of
// n whose positive count lies in [ceil(0.25 n), floor(0.75 n)] is picked
// if one exists; after the last stride the window is relaxed to [0, n]
// and the group is then dropped by the zero-reward-std filter when it is
// all one outcome. The surplus is discarded. No memory across steps.
func simOrchard(ps []float64, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 3))
	minPos, maxPos := int(math.Ceil(0.25*simN)), int(math.Floor(0.75*simN))
	groups := 0
	spent := 0
	for spent < simBudget {
		for _, i := range rng.Perm(len(ps)) {
			pos, neg := 0, 0
			for done := 0; done < simNMax && spent < simBudget; {
				for k := 0; k < simN && spent < simBudget; k++ {
					if bern(rng, ps[i]) {
						pos++
					} else {
						neg++
					}
					spent++
					done++
				}
				if canPick(pos, neg, minPos, maxPos) {
					groups++
					break
				}
			}
			if spent >= simBudget {
				break
			}
		}
	}
	return groups
}

// canPick reports whether some positive count in [minPos, maxPos] can be
// filled from pos positives and neg negatives.
func canPick(pos, neg, minPos, maxPos int) bool {
	for np := minPos; np <= maxPos; np++ {
		if np <= pos && simN-np <= neg {
			return true
		}
	}
	return false
}

// simPlanner drives the planner with Bernoulli outcomes.
func simPlanner(t *testing.T, ps []float64, seed uint64) Metrics {
	t.Helper()
	p := New(Options{N: simN, NMax: simNMax, Batch: simBatch, Seed: seed})
	ids := make(map[string]int, len(ps))
	for i := range ps {
		id := "t" + string(rune('A'+i/26)) + string(rune('a'+i%26))
		ids[id] = i
		p.AddTask(id, Posterior{})
	}
	rng := rand.New(rand.NewPCG(seed, 4))
	exec := func(_ context.Context, step int, strides []Stride) ([]Rollout, error) {
		var rs []Rollout
		for _, s := range strides {
			for k := range s.Count {
				r := Rollout{TaskID: s.TaskID, Sample: s.First + k, Step: step, PolicyVersion: step, Status: StatusCompleted}
				if bern(rng, ps[ids[s.TaskID]]) {
					r.Reward = 1
				}
				rs = append(rs, r)
			}
		}
		return rs, nil
	}
	mixed := func(g *Group) {
		pos := 0
		for _, r := range g.Rollouts {
			if r.Reward > 0 {
				pos++
			}
		}
		if len(g.Rollouts) != simN || pos == 0 || pos == simN {
			t.Fatalf("planner emitted a group of %d with %d positives", len(g.Rollouts), pos)
		}
	}
	if err := Drive(context.Background(), p, DriveOptions{Budget: simBudget, Exec: exec, OnGroup: mixed}); err != nil {
		t.Fatal(err)
	}
	return p.Metrics()
}

// meanSE returns the mean of xs and its standard error.
func meanSE(xs []float64) (mean, se float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	v := 0.0
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(v / float64(len(xs)-1) / float64(len(xs)))
}

// TestSimulationBeatsUniformAndOrchard: for the same budget the planner
// emits more informative groups, so wastes fewer rollouts, than both
// references, by more than three standard errors of the per-seed
// difference (12 fixed seeds, each a fresh task pool).
func TestSimulationBeatsUniformAndOrchard(t *testing.T) {
	var plan, uni, orch, dUni, dOrch, brier []float64
	for s := range uint64(simSeeds) {
		ps := simRates(100 + s)
		m := simPlanner(t, ps, 200+s)
		if m.Rollouts != simBudget || m.Wasted != simBudget-simN*m.Groups {
			t.Fatalf("seed %d: planner spent %d rollouts, wasted %d for %d groups; want %d and %d", s, m.Rollouts, m.Wasted, m.Groups, simBudget, simBudget-simN*m.Groups)
		}
		u, o := simUniform(ps, 300+s), simOrchard(ps, 400+s)
		plan, uni, orch = append(plan, float64(m.Groups)), append(uni, float64(u)), append(orch, float64(o))
		dUni, dOrch = append(dUni, float64(m.Groups-u)), append(dOrch, float64(m.Groups-o))
		brier = append(brier, m.Brier)
	}
	mp, _ := meanSE(plan)
	mu, _ := meanSE(uni)
	mo, _ := meanSE(orch)
	du, seU := meanSE(dUni)
	do, seO := meanSE(dOrch)
	mb, _ := meanSE(brier)
	t.Logf("informative groups over %d seeds, budget %d: planner %.1f, uniform %.1f, orchard %.1f", simSeeds, simBudget, mp, mu, mo)
	t.Logf("wasted rollouts: planner %.1f, uniform %.1f, orchard %.1f", simBudget-simN*mp, simBudget-simN*mu, simBudget-simN*mo)
	t.Logf("margins: vs uniform %+.1f (se %.2f), vs orchard %+.1f (se %.2f); planner Brier %.4f", du, seU, do, seO, mb)
	if du <= 3*seU {
		t.Errorf("planner - uniform = %.1f groups, want > 3 se = %.2f", du, 3*seU)
	}
	if do <= 3*seO {
		t.Errorf("planner - orchard = %.1f groups, want > 3 se = %.2f", do, 3*seO)
	}
}
