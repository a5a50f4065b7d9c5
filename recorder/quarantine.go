package recorder

import "context"

// Quarantined is a stored call record that cannot be decoded: a damaged
// frame, a document that does not parse, or a delta against a call that is
// itself quarantined. It is kept where it is stored (nothing is deleted),
// left out of [Store.Calls] so that it never blocks the episode's other
// calls, other episodes, the pipeline or an export, and reported here.
type Quarantined struct {
	EpisodeID string `json:"episode_id"`
	// CallID is the record's id when the store could still read it.
	CallID string `json:"call_id,omitempty"`
	// Position is the record's 1-based place among the episode's stored
	// records, in storage order.
	Position int `json:"position"`
	// Reason says why it could not be decoded.
	Reason string `json:"reason"`
}

// CheckedReader is implemented by stores that report quarantined records:
// CallsChecked returns what [Store.Calls] returns, and the episode's
// quarantined records beside it. Both backends implement it.
type CheckedReader interface {
	CallsChecked(ctx context.Context, episodeID string) ([]*Call, []Quarantined, error)
}

// CallsChecked returns an episode's good calls and its quarantined records
// from st, which reports none when it is not a [CheckedReader].
func CallsChecked(ctx context.Context, st interface {
	Calls(ctx context.Context, episodeID string) ([]*Call, error)
}, episodeID string) ([]*Call, []Quarantined, error) {
	if cr, ok := st.(CheckedReader); ok {
		return cr.CallsChecked(ctx, episodeID)
	}
	calls, err := st.Calls(ctx, episodeID)
	return calls, nil, err
}
