package redisstore

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/orchard-rl/orchard/recorder"
)

const (
	// scanBudget bounds how many index members one scan script looks at,
	// so that a selective filter over a big index never blocks Redis long.
	scanBudget = 4096
	// pageChunk is how many matches an unlimited listing asks for at once.
	pageChunk = 512
)

// ListEpisodes returns the summaries matching f, oldest first (by
// CreatedAt, which is the first call's start for episodes that only have
// calls, then id), and the cursor of the next page, "" after the last.
// It scans the most selective index set the filter allows (task, then
// group, then status, else all) with the other filters applied in Redis.
// Index entries of episodes whose keys expired are removed on the way.
func (s *Store) ListEpisodes(ctx context.Context, f recorder.Filter) ([]recorder.EpisodeSummary, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	start := "-"
	if !f.Since.IsZero() {
		start = "[" + timeKey(f.Since)
	}
	if f.Cursor != "" {
		after, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		if start == "-" || after >= start[1:] {
			start = "(" + after
		}
	}
	set := s.keys.all()
	switch {
	case f.TaskID != "":
		set = s.keys.filter("task", f.TaskID)
	case f.GroupID != "":
		set = s.keys.filter("group", f.GroupID)
	case f.Status != "":
		set = s.keys.filter("status", f.Status)
	}
	var out []recorder.EpisodeSummary
	var members []string
	for start != "" && (f.Limit <= 0 || len(out) <= f.Limit) {
		want := pageChunk
		if f.Limit > 0 {
			want = f.Limit + 1 - len(out)
		}
		res, err := run(ctx, s.rdb, scriptIndexScan, []string{set, s.keys.entries()}, start, f.TaskID, f.GroupID, f.Status, want, scanBudget).StringSlice()
		if err != nil {
			return nil, "", fmt.Errorf("list episodes: %w", wrapErr(err))
		}
		start = res[0]
		sums, ms, err := s.current(ctx, res[1:])
		if err != nil {
			return nil, "", err
		}
		for i, sum := range sums {
			if matches(sum, f) {
				out, members = append(out, *sum), append(members, ms[i])
			}
		}
	}
	if f.Limit > 0 && len(out) > f.Limit {
		return out[:f.Limit], encodeCursor(members[f.Limit-1]), nil
	}
	return out, "", nil
}

// current returns the summaries of the episodes of index members, with
// their members, leaving out (and unindexing) episodes that no longer
// exist.
func (s *Store) current(ctx context.Context, members []string) ([]*recorder.EpisodeSummary, []string, error) {
	ids := make([]string, 0, len(members))
	for _, m := range members {
		id, ok := memberID(m)
		if !ok {
			return nil, nil, fmt.Errorf("index member %q: %w", m, recorder.ErrCorrupt)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, nil, nil
	}
	sums, err := s.summaries(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	var gone []string
	var outSums []*recorder.EpisodeSummary
	var outMembers []string
	for i, sum := range sums {
		if sum == nil {
			gone = append(gone, ids[i])
			continue
		}
		outSums, outMembers = append(outSums, sum), append(outMembers, members[i])
	}
	if len(gone) > 0 {
		olds, err := s.readEntries(ctx, gone)
		if err == nil {
			_, err = s.unindex(ctx, gone, olds)
		}
		if err != nil {
			s.log.Warn("could not unindex expired episodes", "n", len(gone), "err", err)
		}
	}
	return outSums, outMembers, nil
}

// matches reports whether sum passes f's filters (not its paging): the
// index is checked again against the episode itself, which may have
// changed since.
func matches(sum *recorder.EpisodeSummary, f recorder.Filter) bool {
	return (f.TaskID == "" || sum.TaskID == f.TaskID) &&
		(f.GroupID == "" || sum.GroupID == f.GroupID) &&
		(f.Status == "" || sum.Status == f.Status) &&
		(f.Since.IsZero() || !sum.CreatedAt.Before(f.Since))
}

// A cursor is the index member of the last episode of a page.
func encodeCursor(member string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(member))
}

func decodeCursor(c string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if _, ok := memberID(string(raw)); ok {
			return string(raw), nil
		}
	}
	return "", fmt.Errorf("invalid cursor %q", c)
}
