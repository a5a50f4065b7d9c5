package rollout

import (
	"context"
	"sync"

	"golang.org/x/sync/errgroup"
)

// EpisodeFunc runs sample s of task t.
type EpisodeFunc func(ctx context.Context, t Task, s int) Result

// Sample runs sample s of t in group t.ID.
func (r *Runner) Sample(ctx context.Context, t Task, s int) Result {
	return r.Episode(ctx, t, t.ID, s)
}

// Rollout runs every (task, sample) with at most Options.Concurrency at
// once, calling onResult (when not nil, one call at a time) as each
// finishes, and returns the results in the order they finished.
func (r *Runner) Rollout(ctx context.Context, tasks []Task, onResult func(Result)) []Result {
	return group(ctx, tasks, r.o.N, r.o.Concurrency, r.Sample, onResult)
}

// group is Rollout's loop over an injected episode runner. No new sample
// starts once ctx is done.
func group(ctx context.Context, tasks []Task, n, conc int, one EpisodeFunc, onResult func(Result)) []Result {
	var mu sync.Mutex
	var results []Result
	g := new(errgroup.Group)
	g.SetLimit(conc)
	for _, t := range tasks {
		for s := range n {
			if ctx.Err() != nil {
				break
			}
			g.Go(func() error {
				res := one(ctx, t, s)
				mu.Lock()
				defer mu.Unlock()
				results = append(results, res)
				if onResult != nil {
					onResult(res)
				}
				return nil
			})
		}
	}
	_ = g.Wait()
	return results
}
