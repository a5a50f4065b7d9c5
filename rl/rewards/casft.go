package rewards

import (
	"encoding/json"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/rl/rules"
)

// CASFTOptions tune credit-assignment SFT.
type CASFTOptions struct {
	Delta   float64 // the peak must exceed the start by more than this (0.2)
	MinTurn int     // the earliest turn a cut may be at, 1-based (3)
}

// DefaultCASFT are the documented defaults.
var DefaultCASFT = CASFTOptions{Delta: 0.2, MinTurn: 3}

// CASFTSample is one ca-sft line: a trajectory, whole or cut at the
// earliest peak of its value curve, with a loss mask that leaves turns
// whose own process reward is negative in the context untrained.
type CASFTSample struct {
	EpisodeID   string                       `json:"episode_id"`
	Segment     int                          `json:"segment"`
	Messages    []reconstruct.ChatMessage    `json:"messages"`
	Tools       []json.RawMessage            `json:"tools"`
	LossMask    []int8                       `json:"loss_mask"`
	Tokens      *reconstruct.TokenTrajectory `json:"tokens"`
	CutTurn     int                          `json:"cut_turn"`     // last kept turn, 0-based
	ValueCurve  []float64                    `json:"value_curve"`  // cumulative progress minus regression, per turn
	MaskedTurns []int                        `json:"masked_turns"` // kept turns with loss mask 0
	Weight      float64                      `json:"weight"`
	Reason      string                       `json:"reason"` // resolved | peak
}

// CASFT returns the ca-sft sample of an annotated trajectory, and false
// when it yields none: no outcome, or an unresolved episode without a
// peak that qualifies.
func (s *Scores) CASFT(t *reconstruct.Trajectory, o CASFTOptions) (*CASFTSample, bool) {
	ep := s.eps[t.EpisodeID]
	if ep == nil || ep.outcome == nil || len(t.Turns) == 0 {
		return nil, false
	}
	curve, barrier := s.valueCurve(t)
	smp := &CASFTSample{EpisodeID: t.EpisodeID, Segment: t.Segment, ValueCurve: curve, MaskedTurns: []int{}}
	cut := len(t.Turns) - 1
	if ep.status == "success" {
		smp.Reason, smp.Weight = "resolved", 1
	} else {
		peak := 0
		for i, v := range curve {
			if v > curve[peak] {
				peak = i
			}
		}
		if curve[peak] <= o.Delta || peak+1 < o.MinTurn || barrier <= peak {
			return nil, false
		}
		cut, smp.Reason, smp.Weight = peak, "peak", curve[peak]
	}
	smp.CutTurn = cut
	s.cutSample(t, smp, cut)
	return smp, true
}

// valueCurve is the cumulative sum of progress and regression deltas per
// turn, and the first turn with a masking hit (len when none).
func (s *Scores) valueCurve(t *reconstruct.Trajectory) ([]float64, int) {
	curve := make([]float64, len(t.Turns))
	barrier := len(t.Turns)
	v := 0.0
	for i, tt := range t.Turns {
		if ts := s.turns[callKey{t.EpisodeID, tt.CallID}]; ts != nil {
			for _, h := range ts.hits {
				switch h.Class {
				case rules.ClassProgress, rules.ClassRegression:
					v += h.Delta
				case rules.ClassMasking:
					barrier = min(barrier, i)
				}
			}
		}
		curve[i] = v
	}
	return curve, barrier
}

// cutSample fills the messages, mask and tokens of turns [0, cut].
func (s *Scores) cutSample(t *reconstruct.Trajectory, smp *CASFTSample, cut int) {
	end := len(t.Messages)
	if cut+1 < len(t.Turns) {
		end = t.Turns[cut].MessageIndex
		for end < len(t.LossMask) && t.LossMask[end] == 1 {
			end++
		}
	}
	smp.Messages, smp.LossMask = t.Messages[:end], append([]int8(nil), t.LossMask[:end]...)
	smp.Tools = t.Tools
	var tokEnd int
	for i := 0; i <= cut; i++ {
		k := callKey{t.EpisodeID, t.Turns[i].CallID}
		if span, ok := s.tokens[k]; ok {
			tokEnd = span[0] + span[1]
		}
		ts := s.turns[k]
		if ts == nil || ts.process >= 0 {
			continue
		}
		smp.MaskedTurns = append(smp.MaskedTurns, i)
		for m := t.Turns[i].MessageIndex; m >= 0 && m < end && smp.LossMask[m] == 1; m++ {
			smp.LossMask[m] = 0
		}
	}
	if t.Tokens != nil && tokEnd <= len(t.Tokens.InputIDs) {
		smp.Tokens = s.cutTokens(t, smp, tokEnd)
	}
}

// cutTokens truncates the token trajectory and masks negative turns.
func (s *Scores) cutTokens(t *reconstruct.Trajectory, smp *CASFTSample, n int) *reconstruct.TokenTrajectory {
	tt := &reconstruct.TokenTrajectory{InputIDs: t.Tokens.InputIDs[:n], LossMask: append([]int8(nil), t.Tokens.LossMask[:n]...),
		Logprobs: t.Tokens.Logprobs[:n]}
	for _, i := range smp.MaskedTurns {
		span := s.tokens[callKey{t.EpisodeID, t.Turns[i].CallID}]
		for p := span[0]; p < span[0]+span[1] && p < n; p++ {
			tt.LossMask[p] = 0
		}
	}
	if len(t.Tokens.Advantages) >= n {
		tt.Advantages = t.Tokens.Advantages[:n]
	}
	return tt
}
