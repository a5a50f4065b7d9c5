package lineage

import (
	"context"

	"github.com/orchard-rl/orchard/recorder"
)

// Reclassify sets every call's Lineage from the calls before it in the
// slice, exactly as one [Tracker] that saw the whole episode in that order
// would: calls that make no turn get a nil Lineage. Give it an episode's
// calls as [recorder.Store.Calls] returns them (arrival order) and the
// result depends only on what is stored, never on which proxy replica
// recorded which call or whether one restarted.
func Reclassify(calls []*recorder.Call) {
	for i, l := range Classify(calls) {
		if l.Kind == "" {
			calls[i].Lineage = nil
			continue
		}
		calls[i].Lineage = &l
	}
}

// Store is a [recorder.Store] whose Calls returns lineage reclassified from
// the stored episode (see [Reclassify]) in place of the lineage each call
// was recorded with.
//
// Why on read: a proxy classifies a call against the calls its own
// [Tracker] has seen. Behind a round-robin Service each replica sees part
// of an episode, and a restarted replica sees none of it, so the recorded
// lineage can call a continuation a root. Calls are stored in arrival
// order, (StartedAt, CallID), whichever replica wrote them, so classifying
// on read gives N replicas exactly the answer of one, with no shared state
// on the request path. Classification is linear in the episode's tokens.
type Store struct {
	recorder.Store
}

// Calls returns the episode's calls in arrival order with their lineage
// reclassified.
func (s Store) Calls(ctx context.Context, episodeID string) ([]*recorder.Call, error) {
	calls, err := s.Store.Calls(ctx, episodeID)
	if err != nil {
		return nil, err
	}
	Reclassify(calls)
	return calls, nil
}

// CallsChecked is [recorder.CallsChecked] on the wrapped store, with the
// good calls reclassified as [Store.Calls] does.
func (s Store) CallsChecked(ctx context.Context, episodeID string) ([]*recorder.Call, []recorder.Quarantined, error) {
	calls, bad, err := recorder.CallsChecked(ctx, s.Store, episodeID)
	if err != nil {
		return nil, nil, err
	}
	Reclassify(calls)
	return calls, bad, nil
}

// CreateEpisode is [recorder.CreateEpisode] on the wrapped store, so that
// an atomic create stays atomic behind the wrapper.
func (s Store) CreateEpisode(ctx context.Context, ep *recorder.Episode) error {
	return recorder.CreateEpisode(ctx, s.Store, ep)
}
