package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchard-rl/orchard/internal/cliconf"
	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/embedded"
	lin "github.com/orchard-rl/orchard/recorder/lineage"
	"github.com/orchard-rl/orchard/recorder/redisstore"
)

// storeFlags are the flags every command that reads recorded data shares.
type storeFlags struct {
	data  string // embedded store directory
	redis string // Redis URL; wins over data when set
}

// addStoreFlags registers --data and --redis on cmd.
func addStoreFlags(cmd *cobra.Command, f *storeFlags) {
	cmd.Flags().StringVar(&f.data, "data", "./orchard-data", "embedded store directory")
	cmd.Flags().StringVar(&f.redis, "redis", "", "Redis URL (redis://, rediss://, or redis+cluster://host1,host2); overrides --data")
	cliconf.SetEnv(cmd.Flags(), "redis", "ORCHARD_REDIS_URL")
}

// openReadStore opens the configured store for reading; it never locks out a
// proxy that is writing the same store. Its calls carry lineage classified
// from the stored episode, the same whichever replica recorded them.
func openReadStore(cmd *cobra.Command, f *storeFlags) (recorder.Store, error) {
	st, err := openRawReadStore(cmd, f)
	if err != nil {
		return nil, err
	}
	return lin.Store{Store: st}, nil
}

func openRawReadStore(cmd *cobra.Command, f *storeFlags) (recorder.Store, error) {
	if f.redis != "" {
		return openRedis(cmd.Context(), f.redis, 0, slog.New(slog.DiscardHandler))
	}
	st, err := embedded.OpenReadOnly(f.data)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no recordings in %s (run `orchard proxy --data %s` first, or pass --data DIR)", f.data, f.data)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", f.data, err)
	}
	return st, nil
}

// dedupBounds bound the dedup state a writing store keeps in memory; a
// zero field takes the store's default.
type dedupBounds struct{ bytes, episodes int }

// openWriteStore opens the store the proxy records into.
func openWriteStore(ctx context.Context, data, redisURL string, retention time.Duration, dedup dedupBounds, lg *slog.Logger) (recorder.Store, error) {
	if redisURL != "" {
		// The proxy starts while Redis is down: its calls spill and are
		// replayed when Redis answers (a crash during an outage must not
		// keep the proxy down and its spill unreplayed).
		return openRedisOpts(ctx, redisURL, redisstore.Options{Retention: retention, Logger: lg, StartDown: true,
			MaxEncoderBytes: dedup.bytes, MaxEncoders: dedup.episodes})
	}
	st, err := embedded.Open(data, embedded.Options{Logger: lg, MaxEncoderBytes: dedup.bytes, MaxEncoders: dedup.episodes})
	if errors.Is(err, embedded.ErrLocked) {
		return nil, fmt.Errorf("store %s is in use by another orchard proxy (one writer per directory; use --redis for several replicas): %w", data, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", data, err)
	}
	return st, nil
}
