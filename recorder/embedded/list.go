package embedded

import (
	"context"
	"slices"

	"github.com/orchard-rl/orchard/recorder"
)

// key is the episode's place in a listing.
func (st *episodeState) key() listKey {
	if st.meta != nil {
		return listKey{st.meta.CreatedAt, st.id}
	}
	return listKey{st.first, st.id}
}

// matchesState reports whether st passes f's filters (not its paging),
// without building its summary.
func matchesState(st *episodeState, f recorder.Filter) bool {
	task, group, status := "", "", recorder.StatusRunning
	if st.meta != nil {
		task, group, status = st.meta.TaskID, st.meta.GroupID, st.meta.Status
	}
	return (f.TaskID == "" || task == f.TaskID) &&
		(f.GroupID == "" || group == f.GroupID) &&
		(f.Status == "" || status == f.Status) &&
		(f.Since.IsZero() || !st.key().at.Before(f.Since))
}

// firstMatches returns, in listing order, the first n episodes after
// after (nil: from the start) that pass f, plus one more when there is
// one, so the caller knows a next page exists; n <= 0 means all. It keeps
// at most n+1 episodes while it scans the index, so a page of a listing
// costs memory for the page, not for the store: the first 50 of 100k
// episodes used to build and sort all 100k summaries.
func (x *index) firstMatches(f recorder.Filter, after *listKey, n int) []*episodeState {
	var top []*episodeState
	cmpState := func(a, b *episodeState) int { return a.key().compare(b.key()) }
	for _, st := range x.eps {
		if !matchesState(st, f) || (after != nil && st.key().compare(*after) <= 0) {
			continue
		}
		if n > 0 && len(top) == n+1 {
			if cmpState(st, top[n]) >= 0 {
				continue
			}
			top = top[:n]
		}
		i, _ := slices.BinarySearchFunc(top, st, cmpState)
		top = slices.Insert(top, i, st)
	}
	return top
}

// CountEpisodes returns how many episodes of each status pass f's task,
// group and time filters (its Status, Limit and Cursor are ignored). It
// reads only the in-memory index: no records are decoded.
func (s *Store) CountEpisodes(ctx context.Context, f recorder.Filter) (map[string]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.Status = ""
	out := map[string]int{}
	err := s.view(func() error {
		for _, st := range s.idx.eps {
			if matchesState(st, f) {
				status := recorder.StatusRunning
				if st.meta != nil {
					status = st.meta.Status
				}
				out[status]++
			}
		}
		return nil
	})
	return out, err
}
