package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orchard-rl/orchard/recorder"
)

// PutEpisode creates or replaces an episode's metadata. A zero CreatedAt is
// set to now and an empty Status to "running" in what is stored. When
// FinishedAt is set and [Options.Retention] is positive, every key of the
// episode expires after Retention (counted from this call); a later
// PutEpisode without FinishedAt makes them persistent again. An episode
// stored as finished lets go of this client's dedup encoder for it.
func (s *Store) PutEpisode(ctx context.Context, ep *recorder.Episode) error {
	return s.putEpisode(ctx, ep, scriptPutEpisode)
}

// CreateEpisode is [Store.PutEpisode] for an episode not stored yet; for
// one that is (with metadata, calls or events) it returns an error
// wrapping [recorder.ErrExists]. The check and the write are one script,
// so of concurrent creates from any number of clients exactly one wins.
func (s *Store) CreateEpisode(ctx context.Context, ep *recorder.Episode) error {
	return s.putEpisode(ctx, ep, scriptCreateEpisode)
}

func (s *Store) putEpisode(ctx context.Context, ep *recorder.Episode, sc *script) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e, err := recorder.NormalizeEpisode(ep)
	if err != nil {
		return err
	}
	meta, err := json.Marshal(&e)
	if err != nil {
		return fmt.Errorf("put episode %s: %w", e.ID, err)
	}
	var expire int64
	if e.FinishedAt != nil && s.opts.Retention > 0 {
		expire = max(s.opts.Retention.Milliseconds(), 1)
	}
	cl := &call{sc: sc, keys: s.keys.episode(e.ID).all(), args: []any{meta, nonce(), expire}}
	var entry *redis.SliceCmd
	runPipeline(ctx, s.rdb, []*call{cl}, func(p redis.Pipeliner) { entry = p.HMGet(ctx, s.keys.entries(), e.ID) })
	v, err := cl.cmd.Slice()
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("create episode %s: %w", e.ID, recorder.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("put episode %s: %w", e.ID, wrapErr(err))
	}
	if e.Finished() {
		s.encs.finish(e.ID) // its calls are over but for those on their way; a later one rebuilds it from Redis
	}
	ver, _ := v[0].(int64)
	first, _ := v[1].(string)
	return s.reindexOne(ctx, e.ID, entry, string(meta), first, ver)
}

// reindexOne updates one episode's index entry after a write that returned
// its state, with entry the HMGET of its old entry sent along.
func (s *Store) reindexOne(ctx context.Context, id string, entry *redis.SliceCmd, meta, first string, ver int64) error {
	olds, err := entryStrings(entry)
	if err != nil {
		if olds, err = s.readEntries(ctx, []string{id}); err != nil {
			return err
		}
	}
	it, need, err := indexItemFor(id, olds[0], meta, first, ver)
	if err != nil || !need {
		return err
	}
	return s.reindex(ctx, []indexItem{it})
}

// AppendEvent stores ev after the episode's earlier events, with Seq set to
// the returned 1-based number and a zero At set to now; ev itself is not
// modified. An event may be the first record of an episode.
func (s *Store) AppendEvent(ctx context.Context, ev *recorder.Event) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if ev == nil || ev.EpisodeID == "" {
		return 0, errors.New("append event: event without episode_id")
	}
	e := *ev
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	e.Seq = 0 // the list position is the sequence number
	data, err := json.Marshal(&e)
	if err != nil {
		return 0, fmt.Errorf("append event to %s: %w", e.EpisodeID, err)
	}
	ek := s.keys.episode(e.EpisodeID)
	cl := &call{sc: scriptAppendEvent, keys: []string{ek.ep, ek.events}, args: []any{data, nonce()}}
	var entry *redis.SliceCmd
	runPipeline(ctx, s.rdb, []*call{cl}, func(p redis.Pipeliner) { entry = p.HMGet(ctx, s.keys.entries(), e.EpisodeID) })
	v, err := cl.cmd.Slice()
	if err != nil {
		return 0, fmt.Errorf("append event to %s: %w", e.EpisodeID, wrapErr(err))
	}
	seq, _ := v[0].(int64)
	ver, _ := v[1].(int64)
	first, _ := v[2].(string)
	meta, _ := v[3].(string)
	return seq, s.reindexOne(ctx, e.EpisodeID, entry, meta, first, ver)
}

// DeleteEpisode removes an episode's keys and index entry. It returns
// [recorder.ErrNotFound] when the episode has no keys (it may have
// expired); its index entry is removed anyway. Other stores notice the
// deletion at their next write to the episode and start it afresh.
func (s *Store) DeleteEpisode(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n, err := s.deleteEpisodes(ctx, []string{id})
	if err != nil {
		return err
	}
	if n[0] == 0 {
		return fmt.Errorf("delete episode %s: %w", id, recorder.ErrNotFound)
	}
	return nil
}

// deleteEpisodes deletes the keys and index entries of ids and returns,
// per id, how many keys it deleted.
func (s *Store) deleteEpisodes(ctx context.Context, ids []string) ([]int64, error) {
	dels := make([]*redis.IntCmd, len(ids))
	var entries *redis.SliceCmd
	p := s.rdb.Pipeline()
	for i, id := range ids {
		dels[i] = p.Del(ctx, s.keys.episode(id).all()...)
		s.encs.drop(id)
	}
	entries = p.HMGet(ctx, s.keys.entries(), ids...)
	p.Exec(ctx)
	out := make([]int64, len(ids))
	for i, d := range dels {
		n, err := d.Result()
		if err != nil {
			return nil, fmt.Errorf("delete episode %s: %w", ids[i], wrapErr(err))
		}
		out[i] = n
	}
	olds, err := entryStrings(entries)
	if err != nil {
		return nil, fmt.Errorf("delete episodes: read index: %w", wrapErr(err))
	}
	if _, err := s.unindex(ctx, ids, olds); err != nil {
		return nil, err
	}
	return out, nil
}

// gcBatch is how many finished episodes GC handles per round trip.
const gcBatch = 256

// GC deletes the episodes that finished more than olderThan ago, with
// their calls and events, and clears the index entries of episodes whose
// keys have expired ([Options.Retention]). It returns how many episodes it
// removed from the index. Running episodes are never collected.
func (s *Store) GC(ctx context.Context, olderThan time.Duration) (int, error) {
	now := time.Now()
	cutoff := now.Add(-olderThan).UnixMilli()
	expired := cutoff
	if s.opts.Retention > 0 {
		expired = max(cutoff, now.Add(-s.opts.Retention).UnixMilli())
	}
	total := 0
	after := "-inf"
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.keys.finished(), Start: after, Stop: strconv.FormatInt(expired, 10), ByScore: true, Count: gcBatch}).Result()
		if err != nil {
			return total, fmt.Errorf("gc: list finished episodes: %w", wrapErr(err))
		}
		if len(ids) == 0 {
			return total, nil
		}
		n, err := s.collect(ctx, ids, cutoff)
		total += n
		if err != nil {
			return total, err
		}
		if n == 0 { // none of this page could be removed (changed concurrently): move past it
			score, err := s.rdb.ZScore(ctx, s.keys.finished(), ids[len(ids)-1]).Result()
			if err != nil {
				return total, fmt.Errorf("gc: %w", wrapErr(err))
			}
			after = "(" + strconv.FormatFloat(score, 'f', -1, 64)
		}
	}
}

// collect removes the given finished episodes: those finished before cutoff
// entirely, the others only from the index and only if their keys are gone.
func (s *Store) collect(ctx context.Context, ids []string, cutoff int64) (int, error) {
	olds, err := s.readEntries(ctx, ids)
	if err != nil {
		return 0, err
	}
	var del, gone []string
	var delOld, goneOld []string
	exists := make([]*redis.IntCmd, len(ids))
	p := s.rdb.Pipeline()
	for i, id := range ids {
		exists[i] = p.Exists(ctx, s.keys.episode(id).ep)
	}
	p.Exec(ctx)
	for i, id := range ids {
		var o indexEntry
		if olds[i] == "" || json.Unmarshal([]byte(olds[i]), &o) != nil || o.F == 0 {
			continue
		}
		n, err := exists[i].Result()
		if err != nil {
			return 0, fmt.Errorf("gc: %w", wrapErr(err))
		}
		switch {
		case o.F <= cutoff:
			del, delOld = append(del, id), append(delOld, olds[i])
		case n == 0:
			gone, goneOld = append(gone, id), append(goneOld, olds[i])
		}
	}
	if len(del) > 0 {
		p := s.rdb.Pipeline()
		for _, id := range del {
			p.Del(ctx, s.keys.episode(id).all()...)
			s.encs.drop(id)
		}
		if _, err := p.Exec(ctx); err != nil {
			return 0, fmt.Errorf("gc: delete episodes: %w", wrapErr(err))
		}
	}
	return s.unindex(ctx, append(del, gone...), append(delOld, goneOld...))
}
