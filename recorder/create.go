package recorder

import (
	"context"
	"errors"
	"fmt"
)

// ErrExists is returned by [Creator.CreateEpisode] for an episode that is
// already stored (with metadata, calls or events).
var ErrExists = errors.New("already exists")

// Creator is implemented by stores that create an episode atomically:
// CreateEpisode stores ep as [Store.PutEpisode] does unless the episode
// already exists, in which case it returns an error wrapping [ErrExists].
// Of several concurrent creates of one id, from any number of processes
// sharing the store, exactly one succeeds. Both backends implement it.
type Creator interface {
	CreateEpisode(ctx context.Context, ep *Episode) error
}

// CreateEpisode creates ep in st if it does not exist yet. When st is not a
// [Creator] it checks and then puts, which is not atomic: callers that
// need one winner must serialise their creates themselves.
func CreateEpisode(ctx context.Context, st interface {
	PutEpisode(ctx context.Context, ep *Episode) error
	Episode(ctx context.Context, id string) (*EpisodeSummary, error)
}, ep *Episode) error {
	if c, ok := st.(Creator); ok {
		return c.CreateEpisode(ctx, ep)
	}
	_, err := st.Episode(ctx, ep.ID)
	switch {
	case err == nil:
		return fmt.Errorf("episode %s: %w", ep.ID, ErrExists)
	case !errors.Is(err, ErrNotFound):
		return err
	}
	return st.PutEpisode(ctx, ep)
}
