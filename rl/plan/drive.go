package plan

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// Exec runs the strides of one round at once and returns their rollouts,
// one per requested sample (Rollout.Sample from Stride.First on).
type Exec func(ctx context.Context, step int, strides []Stride) ([]Rollout, error)

// DriveOptions configures [Drive].
type DriveOptions struct {
	Budget        int // rollouts to spend in all; required
	PolicyVersion int // version of the rollouts' policy, for recycling
	FirstStep     int // the first step's number
	Exec          Exec
	// OnGroup, when set, receives each selected group as it is selected.
	OnGroup func(*Group)
}

// Drive runs p step after step until Budget rollouts are spent or no task
// is left to schedule: each step's strides run in rounds (all open
// attempts' next strides at once, clipped to the budget left), their
// outcomes are observed in task then sample order, and the next strides
// decided. Given the planner's seed and Exec's outcomes the sequence of
// strides is always the same, which is what makes a stopped run
// resumable.
func Drive(ctx context.Context, p *Planner, o DriveOptions) error {
	spent, idle := 0, 0
	for step := o.FirstStep; spent < o.Budget; step++ {
		strides := p.Begin(step, o.PolicyVersion)
		if len(strides) == 0 {
			if idle++; idle > p.o.ParkSteps+1 {
				break
			}
			continue
		}
		idle = 0
		for len(strides) > 0 && spent < o.Budget {
			strides = clip(strides, o.Budget-spent)
			n, err := p.round(ctx, step, strides, o)
			spent += n
			if err != nil {
				return err
			}
			strides = p.nextStrides(strides, o.OnGroup)
		}
	}
	p.EndStep()
	return nil
}

// round runs strides and observes their rollouts in a fixed order.
func (p *Planner) round(ctx context.Context, step int, strides []Stride, o DriveOptions) (int, error) {
	rs, err := o.Exec(ctx, step, strides)
	if err != nil {
		return 0, fmt.Errorf("step %d: %w", step, err)
	}
	idx := map[string]int{}
	for i, s := range strides {
		idx[s.TaskID] = i
	}
	slices.SortStableFunc(rs, func(a, b Rollout) int {
		return cmp.Or(cmp.Compare(idx[a.TaskID], idx[b.TaskID]), cmp.Compare(a.Sample, b.Sample))
	})
	for _, r := range rs {
		if err := p.Observe(r); err != nil {
			return len(rs), err
		}
	}
	return len(rs), nil
}

func (p *Planner) nextStrides(done []Stride, onGroup func(*Group)) []Stride {
	var next []Stride
	for _, s := range done {
		st, g := p.Next(s.TaskID)
		if g != nil && onGroup != nil {
			onGroup(g)
		}
		if st.Count > 0 {
			next = append(next, st)
		}
	}
	return next
}

// clip cuts strides, in order, to at most left rollouts in all.
func clip(strides []Stride, left int) []Stride {
	var out []Stride
	for _, s := range strides {
		s.Count = min(s.Count, left)
		left -= s.Count
		if s.Count > 0 {
			out = append(out, s)
		}
	}
	return out
}
