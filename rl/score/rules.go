package score

import (
	"context"
	"fmt"
	"math"
)

// RuleTotals are an episode's summed reward deltas per rule id, plus any
// patch features (files edited, lines changed) under their own names.
type RuleTotals map[string]float64

// RulesOptions configures [NewRules].
type RulesOptions struct {
	// Totals computes an episode's rule totals; required. The product
	// wires it to the rewards package's per-rule totals; tests pass a
	// fake.
	Totals func(ctx context.Context, ep *Episode) (RuleTotals, error)
	// Weights multiply each total (default 1 for a rule not listed; 0
	// leaves a feature out of the value).
	Weights map[string]float64
	// Scale is the logistic's slope; default 4.
	Scale float64
	// Bias is added before the logistic; default 0.
	Bias float64
}

// Rules scores an episode from its rule totals:
// value = 1 / (1 + exp(-Scale * (Bias + sum_i w_i * total_i))).
// A total of zero scores 0.5 (with Bias 0); the features are the totals.
type Rules struct {
	o RulesOptions
}

// NewRules returns a rules scorer; it panics when Totals is nil.
func NewRules(o RulesOptions) *Rules {
	if o.Totals == nil {
		panic("score.NewRules: nil Totals")
	}
	o.defaults()
	return &Rules{o: o}
}

// defaults fills the zero fields of o.
func (o *RulesOptions) defaults() {
	if o.Scale == 0 {
		o.Scale = 4
	}
}

// Score computes ep's value from its totals.
func (r *Rules) Score(ctx context.Context, ep *Episode) (Score, error) {
	tot, err := r.o.Totals(ctx, ep)
	if err != nil {
		return Score{}, fmt.Errorf("candidate %s: rule totals: %w", ep.ID, err)
	}
	x := r.o.Bias
	for k, v := range tot {
		w, ok := r.o.Weights[k]
		if !ok {
			w = 1
		}
		x += w * v
	}
	return check(ep, Score{Value: 1 / (1 + math.Exp(-r.o.Scale*x)), Features: tot})
}
