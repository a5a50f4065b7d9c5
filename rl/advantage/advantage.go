package advantage

import (
	"fmt"
	"math"
)

// Estimator is an outcome advantage estimator.
type Estimator string

// Estimators.
const (
	RLOO   Estimator = "rloo"   // R_i minus the mean of the other rollouts' outcomes
	GRPO   Estimator = "grpo"   // (R_i - mean) / std (population std)
	DrGRPO Estimator = "drgrpo" // R_i - mean
)

// Options are the parameters of [Group].
type Options struct {
	Gamma     float64   // discount of returns and process returns (1 in the CLI)
	Lambda    float64   // weight of the process term (0.1 in the CLI)
	Estimator Estimator // "" means rloo
}

// Validate reports options Group cannot use.
func (o Options) Validate() error {
	switch {
	case !(o.Gamma >= 0 && o.Gamma <= 1):
		return fmt.Errorf("gamma %v: want a number in [0, 1]", o.Gamma)
	case !(o.Lambda >= 0) || math.IsInf(o.Lambda, 0):
		return fmt.Errorf("lambda %v: want a finite number >= 0", o.Lambda)
	case o.Estimator != "" && o.Estimator != RLOO && o.Estimator != GRPO && o.Estimator != DrGRPO:
		return fmt.Errorf("estimator %q: want rloo, grpo or drgrpo", o.Estimator)
	}
	return nil
}

// Rollout is one rollout of a group.
type Rollout struct {
	Outcome *float64  // nil when the episode has none
	Process []float64 // per-turn process reward
}

// Result is a rollout's per-turn rewards, returns and advantages;
// Advantages is nil when the rollout has no outcome.
type Result struct {
	Rewards, Returns, Advantages []float64
}

// finite returns v, or 0 when it is NaN or infinite.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// Returns returns the discounted return-to-go of rewards.
func Returns(rewards []float64, gamma float64) []float64 {
	out := make([]float64, len(rewards))
	g := 0.0
	for t := len(rewards) - 1; t >= 0; t-- {
		g = finite(rewards[t]) + gamma*g
		out[t] = g
	}
	return out
}

// Group computes every rollout's results; out[i] belongs to rs[i].
func Group(rs []Rollout, o Options) []Result {
	out := make([]Result, len(rs))
	proc := make([][]float64, len(rs))
	var idx []int // rollouts with an outcome
	for i, r := range rs {
		rw := make([]float64, len(r.Process))
		for t, p := range r.Process {
			rw[t] = finite(p)
		}
		proc[i] = Returns(rw, o.Gamma)
		if r.Outcome != nil && len(rw) > 0 {
			rw[len(rw)-1] += finite(*r.Outcome)
		}
		out[i] = Result{Rewards: rw, Returns: Returns(rw, o.Gamma)}
		if r.Outcome != nil {
			idx = append(idx, i)
		}
	}
	outcome := Outcomes(rs, idx, o.Estimator)
	base := processSums(proc, idx)
	n := float64(len(idx))
	for k, i := range idx {
		adv := make([]float64, len(proc[i]))
		for t, p := range proc[i] {
			if n > 1 {
				adv[t] = outcome[k] + o.Lambda*(p-(base[t]-p)/(n-1))
			}
		}
		out[i].Advantages = adv
	}
	return out
}

// processSums returns, per turn index, the sum of the process returns of
// the rollouts idx (0 for a rollout that ended before it).
func processSums(proc [][]float64, idx []int) []float64 {
	var s []float64
	for _, i := range idx {
		for t, p := range proc[i] {
			if t == len(s) {
				s = append(s, 0)
			}
			s[t] += p
		}
	}
	return s
}

// Outcomes returns the outcome advantage of each rollout rs[idx[k]].
func Outcomes(rs []Rollout, idx []int, e Estimator) []float64 {
	out := make([]float64, len(idx))
	n := float64(len(idx))
	if n < 2 || allEqual(rs, idx) {
		return out
	}
	mean := 0.0
	for _, i := range idx {
		mean += finite(*rs[i].Outcome)
	}
	mean /= n
	std := 0.0
	for _, i := range idx {
		d := finite(*rs[i].Outcome) - mean
		std += d * d
	}
	std = math.Sqrt(std / n)
	for k, i := range idx {
		d := finite(*rs[i].Outcome) - mean
		switch e {
		case GRPO:
			if std > 1e-6 {
				out[k] = d / std
			}
		case DrGRPO:
			out[k] = d
		default:
			out[k] = d * n / (n - 1) // R_i - mean of the others
		}
	}
	return out
}

// allEqual reports whether the outcomes of rs[idx] are all the same (the
// mean of equal values can differ from them in the last bit).
func allEqual(rs []Rollout, idx []int) bool {
	for _, i := range idx[1:] {
		if finite(*rs[i].Outcome) != finite(*rs[idx[0]].Outcome) {
			return false
		}
	}
	return true
}
