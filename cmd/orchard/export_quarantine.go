package main

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/orchard-rl/orchard/recorder"
)

// quarantineSource is the store export reads, handing reconstruct each
// episode's good calls and counting the records that cannot be decoded, so
// that one poisoned record costs only itself, never the export.
type quarantineSource struct {
	recorder.Store

	mu       sync.Mutex // guards following
	records  int
	episodes map[string]bool
	first    *recorder.Quarantined
}

// Calls implements reconstruct.Source.
func (q *quarantineSource) Calls(ctx context.Context, episodeID string) ([]*recorder.Call, error) {
	calls, bad, err := recorder.CallsChecked(ctx, q.Store, episodeID)
	if len(bad) > 0 {
		q.mu.Lock()
		if q.episodes == nil {
			q.episodes, q.first = map[string]bool{}, &bad[0]
		}
		q.records += len(bad)
		q.episodes[episodeID] = true
		q.mu.Unlock()
	}
	return calls, err
}

// report says what was skipped and, with strict, fails the export.
func (q *quarantineSource) report(w io.Writer, strict bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.records == 0 {
		return nil
	}
	fmt.Fprintf(w, "skipped %d quarantined record(s) in %d episode(s) that cannot be decoded; first: episode %s record %d: %s\n",
		q.records, len(q.episodes), q.first.EpisodeID, q.first.Position, q.first.Reason)
	if strict {
		fmt.Fprintln(w, "--strict: failing because records were skipped (see `orchard episodes show EPISODE`)")
		return exitError{code: 1}
	}
	return nil
}
