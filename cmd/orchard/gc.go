package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchard-rl/orchard/recorder"
)

func newGCCmd() *cobra.Command {
	var sf storeFlags
	var olderThan time.Duration
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Delete finished episodes older than --older-than",
		Long: `Delete every finished episode (status success, failure, error or timeout) that finished
more than --older-than ago, with its calls and events. Running episodes are never deleted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if olderThan <= 0 {
				return fmt.Errorf("--older-than must be positive, e.g. 168h")
			}
			st, err := openWriteStore(cmd.Context(), sf.data, sf.redis, 0, dedupBounds{}, slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			defer st.Close()
			n, err := collectGarbage(cmd.Context(), st, time.Now().Add(-olderThan), dryRun)
			if err != nil {
				return err
			}
			verb := "deleted"
			if dryRun {
				verb = "would delete"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %d finished episodes\n", verb, n)
			return nil
		},
	}
	addStoreFlags(cmd, &sf)
	cmd.Flags().DurationVar(&olderThan, "older-than", 168*time.Hour, "delete episodes that finished longer ago than this")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count, do not delete")
	return cmd
}

// gcStore is what garbage collection needs from a store.
type gcStore interface {
	ListEpisodes(ctx context.Context, f recorder.Filter) ([]recorder.EpisodeSummary, string, error)
	DeleteEpisode(ctx context.Context, id string) error
}

// collectGarbage deletes the episodes that finished before cutoff and
// returns how many it deleted (or, with dryRun, would delete).
func collectGarbage(ctx context.Context, st gcStore, cutoff time.Time, dryRun bool) (int, error) {
	if g, ok := st.(interface {
		GC(context.Context, time.Duration) (int, error)
	}); ok && !dryRun {
		// The backend knows its finished episodes without a scan.
		return g.GC(ctx, time.Since(cutoff))
	}
	n := 0
	for _, status := range []string{recorder.StatusSuccess, recorder.StatusFailure, recorder.StatusError, recorder.StatusTimeout} {
		f := recorder.Filter{Status: status, Limit: 1000}
		for {
			page, next, err := st.ListEpisodes(ctx, f)
			if err != nil {
				return n, fmt.Errorf("list %s episodes: %w", status, err)
			}
			for _, e := range page {
				if e.FinishedAt == nil || !e.FinishedAt.Before(cutoff) {
					continue
				}
				if !dryRun {
					if err := st.DeleteEpisode(ctx, e.ID); err != nil {
						return n, fmt.Errorf("delete %s: %w", e.ID, err)
					}
				}
				n++
			}
			if next == "" {
				break
			}
			f.Cursor = next
		}
	}
	return n, nil
}

// runGC runs collectGarbage every hour (and once at start) until ctx is
// done, then returns nil: a failed collection is logged and retried an
// hour later, never fatal to the proxy.
func runGC(ctx context.Context, st gcStore, retention time.Duration, lg *slog.Logger) error {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		n, err := collectGarbage(ctx, st, time.Now().Add(-retention), false)
		if err != nil && ctx.Err() == nil {
			lg.Warn("retention: gc failed", "err", err)
		} else if n > 0 {
			lg.Info("retention: deleted finished episodes", "count", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
