package recorder

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"
)

// ErrNotFound is returned by reads of an episode that does not exist.
var ErrNotFound = errors.New("not found")

// Store is the contract every storage backend (the embedded store in
// recorder/embedded, Redis in recorder/redisstore) implements, so that the
// proxy, the CLI and reconstruct work unchanged on either. All methods are
// safe for concurrent use.
//
// Calls are identified by CallID: writing a call whose CallID is already
// stored is a no-op, which makes replay after a crash exactly-once.
// Seq is not trusted on write: readers order an episode's calls by
// (StartedAt, CallID) and number them 1..n in that order.
type Store interface {
	// WriteCalls durably stores a batch of calls (idempotent by CallID).
	WriteCalls(ctx context.Context, calls []*Call) error
	// PutEpisode creates or replaces an episode's metadata.
	PutEpisode(ctx context.Context, ep *Episode) error
	// AppendEvent stores an event after the episode's earlier events and
	// returns its 1-based sequence number.
	AppendEvent(ctx context.Context, ev *Event) (int64, error)

	// ListEpisodes returns summaries matching f, oldest first, and a cursor
	// for the next page ("" at the end). Episodes that only have calls (no
	// PutEpisode) are listed too, with Status "running".
	ListEpisodes(ctx context.Context, f Filter) ([]EpisodeSummary, string, error)
	// Episode returns one episode's summary or ErrNotFound.
	Episode(ctx context.Context, id string) (*EpisodeSummary, error)
	// Calls returns an episode's calls ordered by arrival, Seq filled in.
	Calls(ctx context.Context, episodeID string) ([]*Call, error)
	// Events returns an episode's events in order.
	Events(ctx context.Context, episodeID string) ([]*Event, error)
	// DeleteEpisode removes an episode with its calls and events.
	DeleteEpisode(ctx context.Context, id string) error

	Close() error
}

// DedupStats describes a store's dedup state: the encoders it keeps in
// memory to write an episode's next call as a delta of its earlier ones.
type DedupStats struct {
	Episodes int // episodes whose encoder is in memory
	Bytes    int // the encoders' estimated memory, which the store bounds
	// Evictions counts encoders let go by the store's bounds (episodes or
	// bytes), not by their episode finishing or being deleted: the
	// episode's next call rebuilds the encoder from what is stored, and
	// until then its calls may be stored with less dedup.
	Evictions uint64
	// Rebuilds counts encoders rebuilt by reading back an episode's stored
	// calls: after a restart, after another replica wrote the episode (the
	// Redis store), or after the bounds let an episode go while it ran. A
	// steady rise with evictions means the bounds are too small for the
	// episodes running at once.
	Rebuilds uint64
	// Compactions counts encoders compacted (see
	// [EpisodeEncoder.Compact]) because their episode went a whole
	// episode bound's worth of writes (MaxEncoders) without a call.
	Compactions uint64
}

// Filter selects episodes in [Store.ListEpisodes]. Zero fields match all.
type Filter struct {
	TaskID  string
	GroupID string
	Status  string
	Since   time.Time // created (or first call) at or after
	Limit   int       // 0 means no limit
	Cursor  string    // from a previous page
}

// NormalizeEpisode returns the episode as a store keeps it: a zero
// CreatedAt set to now, an empty Status set to "running". It fails for an
// episode without an id.
func NormalizeEpisode(ep *Episode) (Episode, error) {
	if ep == nil || ep.ID == "" {
		return Episode{}, errors.New("put episode: episode without id")
	}
	e := *ep
	if e.CreatedAt.IsZero() {
		e.CreatedAt = time.Now().UTC()
	}
	if e.Status == "" {
		e.Status = StatusRunning
	}
	return e, nil
}

// OrderCalls puts an episode's calls in arrival order, (StartedAt, CallID),
// and numbers their Seq 1..n: the order every [Store.Calls] returns.
func OrderCalls(calls []*Call) {
	slices.SortStableFunc(calls, func(a, b *Call) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.CallID, b.CallID)
	})
	for i, c := range calls {
		c.Seq = int64(i + 1)
	}
}
