package score

import (
	"context"
	"fmt"
)

// OnError is what [Rerank] does when a scorer fails on a candidate.
type OnError string

// OnError values.
const (
	OnErrorStop OnError = "stop" // return the error
	OnErrorSkip OnError = "skip" // leave the candidate out of the choice
	OnErrorZero OnError = "zero" // score the candidate 0
)

// ParseOnError checks a user's --on-error value.
func ParseOnError(s string) (OnError, error) {
	switch v := OnError(s); v {
	case OnErrorStop, OnErrorSkip, OnErrorZero:
		return v, nil
	}
	return "", fmt.Errorf("on-error %q: want stop, skip or zero", s)
}

// Candidate is one scored (or failed) candidate of a task.
type Candidate struct {
	EpisodeID string             `json:"episode_id"`
	Value     *float64           `json:"value"` // null when skipped
	Features  map[string]float64 `json:"features,omitempty"`
	Error     string             `json:"error,omitempty"`
	Reward    *float64           `json:"reward,omitempty"` // the recorded outcome, for evaluation
}

// Choice is the reranking of one task's candidates.
type Choice struct {
	TaskID     string      `json:"task_id"`
	Chosen     string      `json:"chosen"` // the best candidate's episode id; "" when none was scored
	Value      float64     `json:"value"`
	Candidates []Candidate `json:"candidates"`
}

// RerankOptions configures [Rerank].
type RerankOptions struct {
	Scorer  Scorer
	OnError OnError // default stop
	// Failed, when set, is told each error that did not stop the run.
	Failed func(error)
}

// Rerank scores eps one after another and picks, per task (in order of
// first appearance), the candidate with the highest value; ties go to
// the earlier candidate.
func Rerank(ctx context.Context, eps []*Episode, o RerankOptions) ([]Choice, error) {
	var out []Choice
	at := map[string]int{}
	for _, ep := range eps {
		i, ok := at[ep.TaskID]
		if !ok {
			i = len(out)
			at[ep.TaskID] = i
			out = append(out, Choice{TaskID: ep.TaskID})
		}
		c, err := scoreOne(ctx, ep, o)
		if err != nil {
			return out, err
		}
		ch := &out[i]
		ch.Candidates = append(ch.Candidates, c)
		if c.Value != nil && (ch.Chosen == "" || *c.Value > ch.Value) {
			ch.Chosen, ch.Value = c.EpisodeID, *c.Value
		}
	}
	return out, nil
}

func scoreOne(ctx context.Context, ep *Episode, o RerankOptions) (Candidate, error) {
	c := Candidate{EpisodeID: ep.ID, Reward: ep.Reward}
	s, err := o.Scorer.Score(ctx, ep)
	if err == nil {
		s, err = check(ep, s)
	}
	if err == nil {
		c.Value, c.Features = &s.Value, s.Features
		return c, nil
	}
	switch o.OnError {
	case OnErrorSkip, OnErrorZero:
		if o.Failed != nil {
			o.Failed(err)
		}
		c.Error = err.Error()
		if o.OnError == OnErrorZero {
			c.Value = new(float64)
		}
		return c, nil
	}
	return c, err
}
