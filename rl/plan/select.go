package plan

import (
	"cmp"
	"math"
	"slices"
)

// Status is how a rollout ended, in the order selection prefers.
type Status string

// Rollout statuses, best first.
const (
	StatusCompleted Status = "completed"
	StatusTruncated Status = "truncated"
	StatusTimeout   Status = "timeout"
	StatusAborted   Status = "aborted"
)

func (s Status) rank() int {
	switch s {
	case StatusCompleted:
		return 0
	case StatusTruncated:
		return 1
	case StatusTimeout:
		return 2
	}
	return 3
}

// Rollout is one finished attempt at a task.
type Rollout struct {
	ID            string  `json:"id"` // episode id in a live run
	TaskID        string  `json:"task_id"`
	Sample        int     `json:"sample"` // index among the run's rollouts of the task
	Step          int     `json:"step"`
	PolicyVersion int     `json:"policy_version"`
	Reward        float64 `json:"reward"`
	Status        Status  `json:"status"`
	Length        int     `json:"length"` // generated tokens; shorter is preferred
}

// usable reports whether r has an outcome selection can use.
func (r Rollout) usable() bool { return r.Status != StatusAborted }

// positive reports whether r passed (reward > 0, as Orchard's rule).
func (r Rollout) positive() bool { return r.usable() && r.Reward > 0 }

// window is the range of positive counts a group of n may hold.
type window struct{ n, minPos, maxPos int }

// newWindow turns the share range [lo, hi] into counts of a group of n.
func newWindow(n int, lo, hi float64) window {
	const eps = 1e-9
	return window{n: n, minPos: int(math.Ceil(lo*float64(n) - eps)), maxPos: int(math.Floor(hi*float64(n) + eps))}
}

// relaxed is the open window (0, 1): at least one of each outcome.
func (w window) relaxed() window { return window{n: w.n, minPos: 1, maxPos: w.n - 1} }

// pick returns the positive count closest to the window's middle that pos
// positives and neg negatives can fill, or -1.
func (w window) pick(pos, neg int) int {
	ideal := int(math.Round(float64(w.minPos+w.maxPos) / 2))
	best := -1
	for np := w.minPos; np <= w.maxPos; np++ {
		if np <= pos && w.n-np <= neg && (best < 0 || abs(np-ideal) < abs(best-ideal)) {
			best = np
		}
	}
	return best
}

func abs(x int) int { return max(x, -x) }

// take picks a group of w.n from rs whose share of positives (reward > 0)
// lies in the window, closest to its middle, best rollouts first: completed
// before truncated before timed out, then shorter generated length, then
// sample order. Aborted rollouts are never selected. It returns the group
// and the rest, or ok false when no such group exists.
func (w window) take(rs []Rollout) (group, rest []Rollout, ok bool) {
	var pos, neg, other []Rollout
	for _, r := range rs {
		switch {
		case !r.usable():
			other = append(other, r)
		case r.positive():
			pos = append(pos, r)
		default:
			neg = append(neg, r)
		}
	}
	np := w.pick(len(pos), len(neg))
	if np < 0 {
		return nil, rs, false
	}
	sortBest(pos)
	sortBest(neg)
	group = slices.Concat(pos[:np], neg[:w.n-np])
	rest = slices.Concat(pos[np:], neg[w.n-np:], other)
	return group, rest, true
}

func sortBest(rs []Rollout) {
	slices.SortStableFunc(rs, func(a, b Rollout) int {
		return cmp.Or(cmp.Compare(a.Status.rank(), b.Status.rank()), cmp.Compare(a.Length, b.Length), cmp.Compare(a.Sample, b.Sample))
	})
}

// balanceProb is the posterior probability that, after k more rollouts,
// the usable ones in rs can fill the window.
func (w window) balanceProb(rs []Rollout, k int, q Posterior) float64 {
	pos, neg := 0, 0
	for _, r := range rs {
		if r.positive() {
			pos++
		} else if r.usable() {
			neg++
		}
	}
	p := 0.0
	for x := 0; x <= k; x++ {
		if w.pick(pos+x, neg+k-x) >= 0 {
			p += q.predictive(k, x)
		}
	}
	return p
}
