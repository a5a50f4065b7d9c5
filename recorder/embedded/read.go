package embedded

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orchard-rl/orchard/recorder"
)

// view runs fn with the index current: for a read-only store it first scans
// what the writer appended since the last read.
func (s *Store) view(fn func() error) error {
	if s.readOnly {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return ErrClosed
		}
		if err := s.refreshLocked(); err != nil {
			return err
		}
		return fn()
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return fn()
}

// listKey orders episodes oldest first: by creation (or first call) time,
// then id.
type listKey struct {
	at time.Time
	id string
}

func (k listKey) compare(o listKey) int {
	if c := k.at.Compare(o.at); c != 0 {
		return c
	}
	return cmp.Compare(k.id, o.id)
}

// encodeCursor makes the opaque cursor that resumes a listing after k.
func encodeCursor(k listKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(k.at.UnixNano(), 10) + ":" + k.id))
}

func decodeCursor(c string) (listKey, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if ns, id, ok := strings.Cut(string(raw), ":"); ok {
			if n, err := strconv.ParseInt(ns, 10, 64); err == nil {
				return listKey{at: time.Unix(0, n), id: id}, nil
			}
		}
	}
	return listKey{}, fmt.Errorf("invalid cursor %q", c)
}

// ListEpisodes returns the summaries matching f, oldest first (by
// CreatedAt, which is the first call's start for episodes that only have
// calls), and the cursor of the next page, "" after the last.
func (s *Store) ListEpisodes(ctx context.Context, f recorder.Filter) ([]recorder.EpisodeSummary, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	var after *listKey
	if f.Cursor != "" {
		k, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		after = &k
	}
	var out []recorder.EpisodeSummary
	next := ""
	err := s.view(func() error {
		top := s.idx.firstMatches(f, after, f.Limit)
		if f.Limit > 0 && len(top) > f.Limit {
			top = top[:f.Limit]
			next = encodeCursor(top[len(top)-1].key())
		}
		out = make([]recorder.EpisodeSummary, len(top))
		for i, st := range top {
			out[i] = st.summary()
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// Episode returns one episode's summary or [recorder.ErrNotFound].
func (s *Store) Episode(ctx context.Context, id string) (*recorder.EpisodeSummary, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var sum *recorder.EpisodeSummary
	err := s.view(func() error {
		st := s.idx.eps[id]
		if st == nil {
			return fmt.Errorf("episode %s: %w", id, recorder.ErrNotFound)
		}
		v := st.summary()
		sum = &v
		return nil
	})
	return sum, err
}

// snapshot copies what a read needs out of the index, so that the frames
// can be read without holding the lock.
type snapshot struct {
	locs  []loc
	ids   []string // call ids, for call snapshots
	files map[int]*os.File
}

func (s *Store) snapshot(id string, pick func(*episodeState, *snapshot)) (snapshot, error) {
	var snap snapshot
	err := s.view(func() error {
		st := s.idx.eps[id]
		if st == nil {
			return fmt.Errorf("episode %s: %w", id, recorder.ErrNotFound)
		}
		pick(st, &snap)
		snap.files = make(map[int]*os.File, len(s.files))
		for n, f := range s.files {
			snap.files[n] = f
		}
		return nil
	})
	return snap, err
}

func callLocs(st *episodeState, snap *snapshot) {
	snap.locs, snap.ids = make([]loc, len(st.calls)), make([]string, len(st.calls))
	for i, c := range st.calls {
		snap.locs[i], snap.ids[i] = c.at, c.id
	}
}

// Calls returns an episode's calls ordered by (StartedAt, CallID), with Seq
// numbered 1..n in that order, or [recorder.ErrNotFound]. Records that
// cannot be decoded are left out (see [Store.CallsChecked]).
func (s *Store) Calls(ctx context.Context, episodeID string) ([]*recorder.Call, error) {
	calls, bad, err := s.CallsChecked(ctx, episodeID)
	for _, q := range bad {
		s.log.Warn("quarantined call record", "episode", q.EpisodeID, "call", q.CallID, "position", q.Position, "reason", q.Reason)
	}
	return calls, err
}

// CallsChecked implements [recorder.CheckedReader]: the calls of Calls,
// and the episode's records that cannot be decoded.
func (s *Store) CallsChecked(ctx context.Context, episodeID string) ([]*recorder.Call, []recorder.Quarantined, error) {
	snap, err := s.snapshot(episodeID, callLocs)
	if err != nil {
		return nil, nil, err
	}
	blocks := map[recorder.BlockHash][]byte{}
	src := func(h recorder.BlockHash) ([]byte, bool) { b, ok := blocks[h]; return b, ok }
	dec := recorder.NewEpisodeDecoder()
	calls := make([]*recorder.Call, 0, len(snap.locs))
	var bad []recorder.Quarantined
	for i, l := range snap.locs {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		c, err := decodeAt(snap.files[int(l.seg)], l, blocks, dec, src)
		if err != nil {
			bad = append(bad, recorder.Quarantined{EpisodeID: episodeID, CallID: snap.ids[i], Position: i + 1, Reason: err.Error()})
			continue
		}
		calls = append(calls, c)
	}
	recorder.OrderCalls(calls)
	return calls, bad, nil
}

// decodeAt reads, unpacks and decodes the call frame at l, adding its
// blocks to blocks.
func decodeAt(f *os.File, l loc, blocks map[recorder.BlockHash][]byte, dec *recorder.EpisodeDecoder, src recorder.BlockSource) (*recorder.Call, error) {
	p, err := readFrame(f, l.off)
	if err != nil {
		return nil, err
	}
	docBytes, bs, err := recorder.Unpack(p[l.body:])
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		blocks[b.Hash] = b.Data
	}
	return dec.Decode(docBytes, src)
}

// Events returns an episode's events in order, or [recorder.ErrNotFound].
func (s *Store) Events(ctx context.Context, episodeID string) ([]*recorder.Event, error) {
	snap, err := s.snapshot(episodeID, func(st *episodeState, snap *snapshot) { snap.locs = slices.Clone(st.events) })
	if err != nil {
		return nil, err
	}
	evs := make([]*recorder.Event, 0, len(snap.locs))
	for _, l := range snap.locs {
		p, err := readFrame(snap.files[int(l.seg)], l.off)
		if err != nil {
			return nil, fmt.Errorf("episode %s events: %w", episodeID, err)
		}
		ev := new(recorder.Event)
		if err := json.Unmarshal(p[l.body:], ev); err != nil {
			return nil, fmt.Errorf("episode %s events: %w: %w", episodeID, recorder.ErrCorrupt, err)
		}
		evs = append(evs, ev)
	}
	return evs, nil
}
