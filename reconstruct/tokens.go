package reconstruct

import (
	"slices"

	"github.com/orchard-rl/orchard/recorder"
)

// Drift actions (--on-drift): what to do with a segment whose token ids
// break, i.e. a call's prompt ids do not start with the previous call's
// prompt ids and completion ids.
const (
	DriftSplit = "split" // end the segment at the break; the rest is a new segment
	DriftDrop  = "drop"  // emit no trajectory for the segment
	DriftKeep  = "keep"  // emit it whole; only completions still in place are masked in
)

// ValidDriftAction reports whether a is a drift action.
func ValidDriftAction(a string) bool {
	return a == DriftSplit || a == DriftDrop || a == DriftKeep
}

// hasTokens reports whether every call of s carries prompt token ids.
func hasTokens(calls []*callState, s *segment) bool {
	for _, i := range s.calls {
		if t := calls[i].call.Tokens; t == nil || len(t.PromptIDs) == 0 {
			return false
		}
	}
	return len(s.calls) > 0
}

// tokenBreak returns the first position j in s.calls whose successor does
// not extend it token for token, or -1.
func tokenBreak(calls []*callState, s *segment) int {
	for j := 0; j+1 < len(s.calls); j++ {
		a, b := calls[s.calls[j]].call.Tokens, calls[s.calls[j+1]].call.Tokens
		if !hasIDPrefix(b.PromptIDs, a.PromptIDs, a.CompletionIDs) {
			return j
		}
	}
	return -1
}

// driftClass names a token break between prev and next: the class the
// proxy recorded for next when it recorded a drift class, else
// retokenized when the ids differ only from the end of prev's prompt on
// (the completion or its boundary), else template_rewrite (earlier turns
// were rendered differently).
func driftClass(prev, next *callState) string {
	if l := next.call.Lineage; l != nil {
		switch l.Kind {
		case recorder.LineageRetokenized, recorder.LineageTemplateRewrite, recorder.LineageEdited, recorder.LineageCompacted:
			return l.Kind
		}
	}
	p := prev.call.Tokens
	want := slices.Concat(p.PromptIDs, p.CompletionIDs)
	got := next.call.Tokens.PromptIDs
	d := 0
	for d < len(want) && d < len(got) && want[d] == got[d] {
		d++
	}
	if d >= len(p.PromptIDs) {
		return recorder.LineageRetokenized
	}
	return recorder.LineageTemplateRewrite
}

// applyDrift handles token breaks in every segment with token ids by
// action, and returns the segments (split pieces follow their parent)
// with the number of breaks per class added to counts.
func applyDrift(calls []*callState, segs []*segment, action string, counts map[string]int) []*segment {
	out := make([]*segment, 0, len(segs))
	for _, s := range segs {
		for {
			out = append(out, s)
			if !hasTokens(calls, s) {
				break
			}
			j := tokenBreak(calls, s)
			if j < 0 {
				break
			}
			next := calls[s.calls[j+1]]
			d := &Drift{Class: driftClass(calls[s.calls[j]], next), CallID: next.call.CallID, Action: action}
			counts[d.Class]++
			if action == DriftDrop {
				s.drift, s.dropped = d, true
				break
			}
			if action == DriftKeep {
				s.drift = d
				countRemainingBreaks(calls, s, j+1, counts)
				break
			}
			piece := &segment{kind: SegmentDrift, parent: s, drift: d, calls: slices.Clone(s.calls[j+1:]),
				firstOrder: s.calls[j+1], lastOrder: s.lastOrder}
			s.calls = s.calls[:j+1]
			for _, i := range piece.calls {
				calls[i].seg = piece
			}
			s = piece
		}
	}
	return out
}

// countRemainingBreaks counts the breaks after position from of a kept
// segment.
func countRemainingBreaks(calls []*callState, s *segment, from int, counts map[string]int) {
	for j := from; j+1 < len(s.calls); j++ {
		a, b := calls[s.calls[j]], calls[s.calls[j+1]]
		if !hasIDPrefix(b.call.Tokens.PromptIDs, a.call.Tokens.PromptIDs, a.call.Tokens.CompletionIDs) {
			counts[driftClass(a, b)]++
		}
	}
}

// TokenTrajectory is a segment as one token sequence: the last call's
// prompt ids and completion ids, a loss mask that is 1 exactly on tokens
// the policy generated in this segment, and the rollout logprobs of those
// tokens (0 elsewhere).
type TokenTrajectory struct {
	InputIDs []int32   `json:"input_ids"`
	LossMask []int8    `json:"loss_mask"`
	Logprobs []float32 `json:"logprobs"`
	// Advantages, filled by a rewards Annotator, holds each token's
	// advantage: its turn's on generated tokens, 0 where LossMask is 0.
	Advantages []float64 `json:"advantages,omitempty"`
}

// tokenTrajectory builds s's token sequence. A completion is masked in
// only when it sits at its place in the sequence with its own prompt
// before it, which always holds unless the segment was kept despite a
// drift.
func tokenTrajectory(calls []*callState, s *segment) *TokenTrajectory {
	last := calls[s.calls[len(s.calls)-1]].call.Tokens
	ids := slices.Concat(last.PromptIDs, last.CompletionIDs)
	tt := &TokenTrajectory{InputIDs: ids, LossMask: make([]int8, len(ids)), Logprobs: make([]float32, len(ids))}
	for _, i := range s.calls {
		t := calls[i].call.Tokens
		off := len(t.PromptIDs)
		if !hasIDPrefix(ids, t.PromptIDs, t.CompletionIDs) {
			continue
		}
		for k := range t.CompletionIDs {
			tt.LossMask[off+k] = 1
			if len(t.Logprobs) == len(t.CompletionIDs) {
				tt.Logprobs[off+k] = t.Logprobs[k]
			}
		}
	}
	return tt
}
