package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orchard-rl/orchard/recorder"
)

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
	ek := s.keys.episode(episodeID)
	var exists *redis.IntCmd
	var frames *redis.StringSliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, ek.ep)
		frames = p.LRange(ctx, ek.log, 0, -1)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read episode %s: %w", episodeID, wrapErr(err))
	}
	if exists.Val() == 0 {
		return nil, nil, fmt.Errorf("episode %s: %w", episodeID, recorder.ErrNotFound)
	}
	return decodeFrames(ctx, episodeID, frames.Val())
}

// decodeFrames decodes an episode's frames, given in storage order. Blocks
// are gathered from every frame first: a replica that found a call already
// stored by another may reference blocks that only the other's frame holds.
// A frame that does not decode is quarantined, not an error.
func decodeFrames(ctx context.Context, ep string, frames []string) ([]*recorder.Call, []recorder.Quarantined, error) {
	blocks := map[recorder.BlockHash][]byte{}
	docs := make([][]byte, len(frames))
	var bad []recorder.Quarantined
	quarantine := func(i int, err error) {
		bad = append(bad, recorder.Quarantined{EpisodeID: ep, Position: i + 1, Reason: err.Error()})
	}
	for i, f := range frames {
		doc, bs, err := recorder.Unpack([]byte(f))
		if err != nil {
			quarantine(i, err)
			continue
		}
		docs[i] = doc
		for _, b := range bs {
			blocks[b.Hash] = b.Data
		}
	}
	src := func(h recorder.BlockHash) ([]byte, bool) { b, ok := blocks[h]; return b, ok }
	dec := recorder.NewEpisodeDecoder()
	calls := make([]*recorder.Call, 0, len(docs))
	seen := make(map[string]bool, len(docs))
	for i, doc := range docs {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if doc == nil {
			continue
		}
		c, err := dec.Decode(doc, src)
		if err != nil {
			quarantine(i, err)
			continue
		}
		if !seen[c.CallID] { // only if the ids set expired before the log (see scriptWrite)
			seen[c.CallID] = true
			calls = append(calls, c)
		}
	}
	slices.SortFunc(bad, func(a, b recorder.Quarantined) int { return a.Position - b.Position })
	recorder.OrderCalls(calls)
	return calls, bad, nil
}

// Events returns an episode's events in order, or [recorder.ErrNotFound].
func (s *Store) Events(ctx context.Context, episodeID string) ([]*recorder.Event, error) {
	ek := s.keys.episode(episodeID)
	var exists *redis.IntCmd
	var list *redis.StringSliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, ek.ep)
		list = p.LRange(ctx, ek.events, 0, -1)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read events of %s: %w", episodeID, wrapErr(err))
	}
	if exists.Val() == 0 {
		return nil, fmt.Errorf("episode %s: %w", episodeID, recorder.ErrNotFound)
	}
	evs := make([]*recorder.Event, len(list.Val()))
	for i, raw := range list.Val() {
		ev := new(recorder.Event)
		if err := json.Unmarshal([]byte(raw), ev); err != nil {
			return nil, fmt.Errorf("episode %s event %d: %w: %w", episodeID, i+1, recorder.ErrCorrupt, err)
		}
		ev.Seq = int64(i + 1)
		evs[i] = ev
	}
	return evs, nil
}

// Episode returns one episode's summary or [recorder.ErrNotFound].
func (s *Store) Episode(ctx context.Context, id string) (*recorder.EpisodeSummary, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sums, err := s.summaries(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	if sums[0] == nil {
		return nil, fmt.Errorf("episode %s: %w", id, recorder.ErrNotFound)
	}
	return sums[0], nil
}

// summaries reads the summaries of ids in one pipeline; nil where an
// episode does not exist.
func (s *Store) summaries(ctx context.Context, ids []string) ([]*recorder.EpisodeSummary, error) {
	states := make([]*redis.SliceCmd, len(ids))
	lens := make([]*redis.IntCmd, len(ids))
	p := s.rdb.Pipeline()
	for i, id := range ids {
		ek := s.keys.episode(id)
		states[i] = p.HMGet(ctx, ek.ep, "inc", "meta", "first", "last")
		lens[i] = p.LLen(ctx, ek.log)
	}
	p.Exec(ctx)
	out := make([]*recorder.EpisodeSummary, len(ids))
	for i, id := range ids {
		st, err := states[i].Result()
		if err != nil {
			return nil, fmt.Errorf("read episode %s: %w", id, wrapErr(err))
		}
		n, err := lens[i].Result()
		if err != nil {
			return nil, fmt.Errorf("read episode %s: %w", id, wrapErr(err))
		}
		if st[0] == nil {
			continue
		}
		if out[i], err = summary(id, st[1:], n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// summary builds a listing line from HMGET meta first last and the call
// count.
func summary(id string, st []any, calls int64) (*recorder.EpisodeSummary, error) {
	meta, _ := st[0].(string)
	first, _ := st[1].(string)
	last, _ := st[2].(string)
	sum := &recorder.EpisodeSummary{Calls: int(calls)}
	var firstAt, lastAt time.Time
	var err error
	if first != "" {
		if firstAt, err = parseTimeKey(first); err == nil {
			lastAt, err = parseTimeKey(last)
		}
		if err != nil {
			return nil, fmt.Errorf("episode %s: %w: %w", id, recorder.ErrCorrupt, err)
		}
		if calls > 0 {
			sum.FirstCallAt, sum.LastCallAt = &firstAt, &lastAt
		}
	}
	if meta == "" {
		sum.Episode = recorder.Episode{ID: id, Status: recorder.StatusRunning, CreatedAt: firstAt}
		return sum, nil
	}
	if err := json.Unmarshal([]byte(meta), &sum.Episode); err != nil {
		return nil, fmt.Errorf("episode %s metadata: %w: %w", id, recorder.ErrCorrupt, err)
	}
	return sum, nil
}
