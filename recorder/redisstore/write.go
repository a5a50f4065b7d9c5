package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/orchard-rl/orchard/recorder"
)

const (
	// maxWriteRounds bounds how often one WriteCalls re-encodes an episode
	// whose stored state moved under it (another replica wrote it, it was
	// deleted, a call was already stored).
	maxWriteRounds = 4
	// observeWindow is how many of an episode's latest frames a rebuilt
	// encoder observes. Documents whose base lies before the window are
	// skipped (they only cost dedup, never correctness), so that rebuilding
	// a huge episode such as "unattributed" stays bounded.
	observeWindow = 1024
)

// episodeBatch is the part of a WriteCalls batch that goes to one episode.
type episodeBatch struct {
	id    string
	calls []*recorder.Call
	e     *episodeEncoder
	res   writeResult // also set by rebuild when nothing is left to write
	old   *string     // index entry read with the write ("" for none); nil when unknown
}

// writeResult is what the write script answered for an episode.
type writeResult struct {
	stale bool
	inc   string
	ver   int64
	first string
	meta  string
	n     int64  // log length after the write
	last  string // SHA-1 of the batch's last frame
}

// WriteCalls stores calls. A call whose CallID its episode already holds
// (or that appears twice in calls) is skipped, so replays are exactly-once;
// a call without a CallID is an error, and one without an EpisodeID goes to
// [recorder.Unattributed]. The calls are not modified. Each episode's calls
// are appended by one Lua script, all or nothing, and the scripts of all
// episodes of the batch go out in one pipeline. On error, any subset of the
// episodes may have been stored; writing the batch again is safe.
func (s *Store) WriteCalls(ctx context.Context, calls []*recorder.Call) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, c := range calls {
		if c == nil || c.CallID == "" {
			return errors.New("write calls: call without call_id")
		}
	}
	batches := groupCalls(calls)
	for _, b := range batches { // sorted by id, so concurrent batches lock in one order
		b.e = s.encs.get(b.id)
		b.e.mu.Lock()
		defer b.e.mu.Unlock()
	}
	pending := batches
	for round := 0; len(pending) > 0; round++ {
		if round == maxWriteRounds {
			return fmt.Errorf("write calls: episode %s changed under %d attempts to write it", pending[0].id, round)
		}
		if err := s.writeRound(ctx, pending); err != nil {
			return err
		}
		var stale []*episodeBatch
		for _, b := range pending {
			if b.res.stale {
				stale = append(stale, b)
			}
		}
		if len(stale) == 0 {
			break
		}
		if err := s.rebuild(ctx, stale); err != nil {
			return err
		}
		pending = slices.DeleteFunc(stale, func(b *episodeBatch) bool { return len(b.calls) == 0 })
	}
	written := 0
	for _, b := range batches {
		n := 0
		if b.e.enc != nil {
			n = b.e.enc.Bytes()
		}
		s.encs.sized(b.e, n)
		written += len(b.calls)
	}
	s.encs.wrote(written)
	return s.reindexWritten(ctx, batches)
}

// groupCalls splits calls by episode, dropping repeated call ids, and
// returns the batches sorted by episode id.
func groupCalls(calls []*recorder.Call) []*episodeBatch {
	byEp := map[string]*episodeBatch{}
	seen := map[string]bool{}
	for _, c := range calls {
		if seen[c.CallID] {
			continue
		}
		seen[c.CallID] = true
		ep := c.EpisodeID
		if ep == "" {
			ep = recorder.Unattributed
			cc := *c
			cc.EpisodeID = ep
			c = &cc
		}
		b := byEp[ep]
		if b == nil {
			b = &episodeBatch{id: ep}
			byEp[ep] = b
		}
		b.calls = append(b.calls, c)
	}
	out := make([]*episodeBatch, 0, len(byEp))
	for _, b := range byEp {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *episodeBatch) int { return strings.Compare(a.id, b.id) })
	return out
}

// writeRound encodes every batch and sends them in one pipeline. Batches
// the script refused come back with res.stale set and their encoder reset.
// On error every encoder whose outcome is unknown is reset.
func (s *Store) writeRound(ctx context.Context, batches []*episodeBatch) error {
	calls := make([]*call, len(batches))
	errs := make([]error, len(batches))
	n := 0
	for _, b := range batches {
		n += len(b.calls)
	}
	recorder.RunWriteJobs(len(batches), n, func(i int) { // each batch is one episode's, with its own encoder
		b := batches[i]
		args, err := s.encodeBatch(b)
		ek := s.keys.episode(b.id)
		calls[i], errs[i] = &call{sc: scriptWrite, keys: []string{ek.ep, ek.log, ek.ids}, args: args}, err
	})
	for _, err := range errs {
		if err != nil {
			for _, b := range batches {
				b.e.resetLocked() // encoded calls that will not be stored
			}
			return err
		}
	}
	ids := make([]string, len(batches))
	for i, b := range batches {
		ids[i] = b.id
	}
	var entries *redis.SliceCmd
	runPipeline(ctx, s.rdb, calls, func(p redis.Pipeliner) { entries = p.HMGet(ctx, s.keys.entries(), ids...) })
	olds, entriesErr := entryStrings(entries)
	var firstErr error
	for i, b := range batches {
		if entriesErr == nil {
			b.old = &olds[i]
		}
		res, err := parseWriteResult(calls[i].cmd)
		if err != nil {
			b.e.resetLocked()
			if firstErr == nil {
				firstErr = fmt.Errorf("write calls of episode %s: %w", b.id, wrapErr(err))
			}
			continue
		}
		if res.stale {
			b.res = res
			b.e.resetLocked()
			continue
		}
		res.last = b.res.last
		b.res = res
		b.e.inc = res.inc
		if !s.opts.NoDedup {
			b.e.pos, b.e.last = res.n, res.last
		}
	}
	return firstErr
}

// encodeBatch returns the write script's arguments for b, encoding its
// calls with the episode's encoder (a fresh one if it has none).
func (s *Store) encodeBatch(b *episodeBatch) ([]any, error) {
	e := b.e
	if e.enc == nil {
		e.enc = recorder.NewEpisodeEncoder(!s.opts.NoDedup)
	}
	args := make([]any, 0, 4+3*len(b.calls))
	args = append(args, e.inc, e.pos, e.last, nonce())
	var frame []byte
	for _, c := range b.calls {
		doc, blocks, err := e.enc.Encode(c)
		if err != nil {
			return nil, fmt.Errorf("encode call %s: %w", c.CallID, err)
		}
		frame = recorder.Pack(nil, doc, blocks)
		recorder.ReleaseDoc(doc)
		args = append(args, c.CallID, timeKey(c.StartedAt), frame)
	}
	b.res.last = frameSHA(frame)
	return args, nil
}

func parseWriteResult(cmd *redis.Cmd) (writeResult, error) {
	v, err := cmd.Slice()
	if err != nil {
		return writeResult{}, err
	}
	if len(v) == 1 && v[0] == "stale" {
		return writeResult{stale: true}, nil
	}
	if len(v) != 6 || v[0] != "ok" {
		return writeResult{}, fmt.Errorf("unexpected write script reply %v", v)
	}
	r := writeResult{}
	var ok [5]bool
	r.inc, ok[0] = v[1].(string)
	r.ver, ok[1] = v[2].(int64)
	r.first, ok[2] = v[3].(string)
	r.meta, ok[3] = v[4].(string)
	r.n, ok[4] = v[5].(int64)
	if ok != [5]bool{true, true, true, true, true} {
		return writeResult{}, fmt.Errorf("unexpected write script reply %v", v)
	}
	return r, nil
}

// rebuild gives each batch's encoder the episode's stored state: the
// incarnation, and the latest frames observed in storage order. It drops
// from each batch the calls Redis already holds.
func (s *Store) rebuild(ctx context.Context, batches []*episodeBatch) error {
	type reads struct {
		state  *redis.SliceCmd
		n      *redis.IntCmd
		frames *redis.StringSliceCmd
		stored *redis.BoolSliceCmd
	}
	rs := make([]reads, len(batches))
	// MULTI per episode (per slot on a cluster): the state, length, frames
	// and ids are read from one moment of the log.
	s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, b := range batches {
			ek := s.keys.episode(b.id)
			ids := make([]any, len(b.calls))
			for j, c := range b.calls {
				ids[j] = c.CallID
			}
			rs[i] = reads{state: p.HMGet(ctx, ek.ep, "inc", "ver", "first", "meta"), n: p.LLen(ctx, ek.log),
				frames: p.LRange(ctx, ek.log, -observeWindow, -1), stored: p.SMIsMember(ctx, ek.ids, ids...)}
		}
		return nil
	})
	for i, b := range batches {
		st, err := rs[i].state.Result()
		if err != nil {
			return fmt.Errorf("read state of episode %s: %w", b.id, wrapErr(err))
		}
		b.res = stateResult(st)
		frames, err := rs[i].frames.Result()
		if err == nil {
			err = rs[i].n.Err()
		}
		if err != nil {
			return fmt.Errorf("read calls of episode %s: %w", b.id, wrapErr(err))
		}
		stored, err := rs[i].stored.Result()
		if err != nil {
			return fmt.Errorf("read call ids of episode %s: %w", b.id, wrapErr(err))
		}
		n := 0
		b.calls = slices.DeleteFunc(b.calls, func(*recorder.Call) bool { n++; return stored[n-1] })
		b.e.enc, b.e.inc, b.old = recorder.NewEpisodeEncoder(!s.opts.NoDedup), b.res.inc, nil
		if len(frames) > 0 {
			s.encs.rebuilt.Add(1)
		}
		if s.observe(b.e.enc, b.id, frames) > 0 {
			b.e.pos, b.e.last = rs[i].n.Val(), frameSHA([]byte(frames[len(frames)-1]))
		}
	}
	return nil
}

// frameSHA returns the SHA-1 of a frame in hex, as Lua's redis.sha1hex.
func frameSHA(f []byte) string {
	sum := sha1.Sum(f)
	return hex.EncodeToString(sum[:])
}

// stateResult reads HMGET ep inc ver first meta as a write result, so
// that a batch whose calls were all stored already still gets its index
// entry checked (the write that stored them may have failed before
// updating the index).
func stateResult(v []any) writeResult {
	str := func(x any) string { s, _ := x.(string); return s }
	r := writeResult{inc: str(v[0]), first: str(v[2]), meta: str(v[3])}
	r.ver, _ = strconv.ParseInt(str(v[1]), 10, 64)
	return r
}

// observe feeds frames to enc and returns how many it took. A frame it
// cannot read is skipped: enc then just knows less.
func (s *Store) observe(enc *recorder.EpisodeEncoder, ep string, frames []string) int {
	if s.opts.NoDedup {
		return 0
	}
	n := 0
	for _, f := range frames {
		doc, _, err := recorder.Unpack([]byte(f))
		if err == nil {
			err = enc.Observe(doc)
		}
		if err != nil {
			s.log.Debug("skipping stored call while rebuilding dedup state", "episode", ep, "err", err)
			continue
		}
		n++
	}
	return n
}

// reindexWritten brings the index entries of the episodes written up to
// date where the write changed them (a new episode, an earlier first call).
func (s *Store) reindexWritten(ctx context.Context, batches []*episodeBatch) error {
	var written, unknown []*episodeBatch
	for _, b := range batches {
		if b.res.inc == "" {
			continue
		}
		written = append(written, b)
		if b.old == nil {
			unknown = append(unknown, b)
		}
	}
	if len(unknown) > 0 {
		ids := make([]string, len(unknown))
		for i, b := range unknown {
			ids[i] = b.id
		}
		olds, err := s.readEntries(ctx, ids)
		if err != nil {
			return err
		}
		for i, b := range unknown {
			b.old = &olds[i]
		}
	}
	var items []indexItem
	for _, b := range written {
		it, need, err := indexItemFor(b.id, *b.old, b.res.meta, b.res.first, b.res.ver)
		if err != nil {
			return err
		}
		if need {
			items = append(items, it)
		}
	}
	return s.reindex(ctx, items)
}
