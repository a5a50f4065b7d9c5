package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orchard-rl/orchard/recorder"
)

// maxIndexRounds bounds the compare-and-set retries of one index update.
const maxIndexRounds = 5

// indexEntry is an episode's line in the index hash: what the index sets
// need to place it, and the ver of the episode state it was made from.
type indexEntry struct {
	M string `json:"m"`           // member in the index sets
	T string `json:"t,omitempty"` // task id
	G string `json:"g,omitempty"` // group id
	S string `json:"s"`           // status
	V int64  `json:"v"`           // ver of the episode hash
	F int64  `json:"f,omitempty"` // finished at, Unix ms; 0 while running
}

// filterKeys returns the filter sets the entry is a member of.
func (k keys) filterKeys(e indexEntry) []string {
	var out []string
	if e.T != "" {
		out = append(out, k.filter("task", e.T))
	}
	if e.G != "" {
		out = append(out, k.filter("group", e.G))
	}
	return append(out, k.filter("status", e.S))
}

// indexItem is an index update: the new entry and the entry it replaces
// as last read ("" for none).
type indexItem struct {
	id  string
	new indexEntry
	old string
}

// entryFor computes an episode's index entry from its stored metadata
// (JSON, "" when it has none) and first call time key.
func entryFor(id, meta, first string, ver int64) (indexEntry, error) {
	e := indexEntry{S: recorder.StatusRunning, V: ver}
	var created time.Time
	if meta != "" {
		var ep recorder.Episode
		if err := json.Unmarshal([]byte(meta), &ep); err != nil {
			return e, fmt.Errorf("episode %s metadata: %w: %w", id, recorder.ErrCorrupt, err)
		}
		created, e.T, e.G, e.S = ep.CreatedAt, ep.TaskID, ep.GroupID, ep.Status
		if ep.FinishedAt != nil {
			e.F = max(ep.FinishedAt.UnixMilli(), 1)
		}
	} else if first != "" {
		t, err := parseTimeKey(first)
		if err != nil {
			return e, fmt.Errorf("episode %s: %w: %w", id, recorder.ErrCorrupt, err)
		}
		created = t
	}
	e.M = member(created, id)
	return e, nil
}

// indexItemFor returns the update that brings the entry old (JSON, "" for
// none) to the episode's state, and whether it is needed: it is not when
// old was made from this ver or a later one.
func indexItemFor(id, old, meta, first string, ver int64) (indexItem, bool, error) {
	if old != "" {
		var o indexEntry
		if json.Unmarshal([]byte(old), &o) == nil && o.V >= ver {
			return indexItem{}, false, nil
		}
	}
	e, err := entryFor(id, meta, first, ver)
	if err != nil {
		return indexItem{}, false, err
	}
	return indexItem{id: id, new: e, old: old}, true, nil
}

// entryStrings reads the reply of HMGET entries: "" for missing entries.
func entryStrings(cmd *redis.SliceCmd) ([]string, error) {
	vals, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i], _ = v.(string)
	}
	return out, nil
}

// readEntries returns the index entries of ids ("" for none).
func (s *Store) readEntries(ctx context.Context, ids []string) ([]string, error) {
	out, err := entryStrings(s.rdb.HMGet(ctx, s.keys.entries(), ids...))
	if err != nil {
		return nil, fmt.Errorf("read episode index: %w", wrapErr(err))
	}
	return out, nil
}

func (s *Store) indexPutCall(it indexItem) (*call, error) {
	newJSON, err := json.Marshal(it.new)
	if err != nil {
		return nil, fmt.Errorf("index entry of %s: %w", it.id, err)
	}
	newKeys := s.keys.filterKeys(it.new)
	ks := append([]string{s.keys.entries(), s.keys.all(), s.keys.finished()}, newKeys...)
	if it.old != "" {
		var o indexEntry
		if err := json.Unmarshal([]byte(it.old), &o); err == nil {
			ks = append(ks, s.keys.filterKeys(o)...)
		}
	}
	fin := ""
	if it.new.F != 0 {
		fin = fmt.Sprint(it.new.F)
	}
	return &call{sc: scriptIndexPut, keys: ks, args: []any{it.id, it.old, newJSON, it.new.M, it.new.V, fin, len(newKeys)}}, nil
}

// reindex applies index updates with compare-and-set, re-reading the
// entries that another writer changed in between.
func (s *Store) reindex(ctx context.Context, items []indexItem) error {
	for round := 0; len(items) > 0; round++ {
		if round == maxIndexRounds {
			return fmt.Errorf("update episode index: entry of %s changed concurrently %d times", items[0].id, round)
		}
		calls := make([]*call, len(items))
		for i, it := range items {
			var err error
			if calls[i], err = s.indexPutCall(it); err != nil {
				return err
			}
		}
		runPipeline(ctx, s.rdb, calls, nil)
		var again []indexItem
		for i, cl := range calls {
			n, err := cl.cmd.Int64()
			if err != nil {
				return fmt.Errorf("update episode index: %w", wrapErr(err))
			}
			if n == -1 {
				again = append(again, items[i])
			}
		}
		if len(again) == 0 {
			return nil
		}
		ids := make([]string, len(again))
		for i, it := range again {
			ids[i] = it.id
		}
		olds, err := s.readEntries(ctx, ids)
		if err != nil {
			return err
		}
		for i := range again {
			again[i].old = olds[i]
		}
		items = again
	}
	return nil
}

// unindex removes the entries of ids as read (olds), unless they changed
// since, and reports how many it removed.
func (s *Store) unindex(ctx context.Context, ids, olds []string) (int, error) {
	var calls []*call
	for i, id := range ids {
		var o indexEntry
		if olds[i] == "" || json.Unmarshal([]byte(olds[i]), &o) != nil {
			continue
		}
		ks := append([]string{s.keys.entries(), s.keys.all(), s.keys.finished()}, s.keys.filterKeys(o)...)
		calls = append(calls, &call{sc: scriptIndexDel, keys: ks, args: []any{id, olds[i]}})
	}
	if len(calls) == 0 {
		return 0, nil
	}
	runPipeline(ctx, s.rdb, calls, nil)
	n := 0
	for _, cl := range calls {
		v, err := cl.cmd.Int64()
		if err != nil {
			return n, fmt.Errorf("remove from episode index: %w", wrapErr(err))
		}
		n += int(v)
	}
	return n, nil
}
