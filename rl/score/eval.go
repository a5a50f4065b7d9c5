package score

import (
	"math"
	"slices"
)

// Report measures a reranking against the candidates' recorded outcomes
// (success: reward > 0). Only scored candidates count; tasks without one
// are left out.
type Report struct {
	Tasks      int `json:"tasks"`
	Candidates int `json:"candidates"`
	// PassAtN is the share of tasks with at least one success: what an
	// oracle picking among the N would reach.
	PassAtN float64 `json:"pass_at_n"`
	// BestAtN is the share of tasks whose chosen candidate succeeded.
	BestAtN float64 `json:"best_at_n"`
	// RandomAtN is the expected share for a uniformly random pick: the
	// mean over tasks of successes / N.
	RandomAtN float64 `json:"random_at_n"`
	// AUC is the probability that a random success scores above a random
	// failure (ties count half), over all candidates; null without both.
	AUC *float64 `json:"auc"`
	// ECE is the expected calibration error over 10 equal-width bins of
	// the value: sum over bins of (bin size / candidates) * |mean outcome
	// - mean value|.
	ECE float64 `json:"ece"`
}

type scored struct {
	v  float64
	ok bool
}

// Evaluate computes the report of choices.
func Evaluate(choices []Choice) Report {
	var r Report
	var all []scored
	for _, ch := range choices {
		var cs []scored
		chosenOK := false
		for _, c := range ch.Candidates {
			if c.Value == nil {
				continue
			}
			s := scored{*c.Value, c.Reward != nil && *c.Reward > 0}
			cs = append(cs, s)
			if c.EpisodeID == ch.Chosen {
				chosenOK = s.ok
			}
		}
		if len(cs) == 0 {
			continue
		}
		r.Tasks++
		wins := 0
		for _, s := range cs {
			if s.ok {
				wins++
			}
		}
		r.PassAtN += b2f(wins > 0)
		r.BestAtN += b2f(chosenOK)
		r.RandomAtN += float64(wins) / float64(len(cs))
		all = append(all, cs...)
	}
	if r.Tasks > 0 {
		n := float64(r.Tasks)
		r.PassAtN, r.BestAtN, r.RandomAtN = r.PassAtN/n, r.BestAtN/n, r.RandomAtN/n
	}
	r.Candidates = len(all)
	r.AUC = auc(all)
	r.ECE = ece(all, 10)
	return r
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// auc is the Mann-Whitney estimate, ties counted half.
func auc(all []scored) *float64 {
	var pos, neg []float64
	for _, s := range all {
		if s.ok {
			pos = append(pos, s.v)
		} else {
			neg = append(neg, s.v)
		}
	}
	if len(pos) == 0 || len(neg) == 0 {
		return nil
	}
	slices.Sort(neg)
	sum := 0.0
	for _, p := range pos {
		below, _ := slices.BinarySearch(neg, p)
		upTo, _ := slices.BinarySearch(neg, math.Nextafter(p, math.Inf(1)))
		sum += float64(below) + 0.5*float64(upTo-below)
	}
	a := sum / float64(len(pos)*len(neg))
	return &a
}

// ece is the expected calibration error over bins equal-width bins.
func ece(all []scored, bins int) float64 {
	if len(all) == 0 {
		return 0
	}
	n := make([]int, bins)
	sv, so := make([]float64, bins), make([]float64, bins)
	for _, s := range all {
		b := min(bins-1, int(s.v*float64(bins)))
		n[b]++
		sv[b] += s.v
		so[b] += b2f(s.ok)
	}
	e := 0.0
	for b := range bins {
		if n[b] > 0 {
			e += math.Abs(so[b]-sv[b]) / float64(len(all))
		}
	}
	return e
}
