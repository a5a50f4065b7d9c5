package score

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Episode is a candidate as scorers see it.
type Episode struct {
	ID     string `json:"episode_id"`
	TaskID string `json:"task_id"`
	// Prompt is the task as the harness first asked the model.
	Prompt string `json:"prompt"`
	// Final is the text of the last assistant completion.
	Final  string `json:"final"`
	Status string `json:"status"` // episode status; "running" for an open one
	Calls  int    `json:"calls"`
	// Reward is the recorded outcome; scorers must not read it (it is what
	// they predict), it is carried for [Evaluate] and never sent.
	Reward *float64 `json:"-"`
}

// Score is a scorer's verdict on one episode.
type Score struct {
	Value    float64            `json:"value"` // in [0, 1]; higher is better
	Features map[string]float64 `json:"features,omitempty"`
}

// Scorer rates one episode. Implementations must be safe for concurrent
// use.
type Scorer interface {
	Score(ctx context.Context, ep *Episode) (Score, error)
}

// Func adapts a function to [Scorer].
type Func func(ctx context.Context, ep *Episode) (Score, error)

// Score calls f.
func (f Func) Score(ctx context.Context, ep *Episode) (Score, error) { return f(ctx, ep) }

// ErrBadScore is wrapped by errors for answers that are not a value in
// [0, 1].
var ErrBadScore = errors.New("bad score")

// check rejects a value that is NaN, infinite or outside [0, 1].
func check(ep *Episode, s Score) (Score, error) {
	if math.IsNaN(s.Value) || s.Value < 0 || s.Value > 1 {
		return Score{}, fmt.Errorf("candidate %s: %w: value %v not in [0, 1]", ep.ID, ErrBadScore, s.Value)
	}
	for k, v := range s.Features {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Score{}, fmt.Errorf("candidate %s: %w: feature %q is %v", ep.ID, ErrBadScore, k, v)
		}
	}
	return s, nil
}
