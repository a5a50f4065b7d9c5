package main

import (
	"context"
	"errors"

	"github.com/orchard-rl/orchard/recorder"
)

// openRedis opens the Redis store at url.
func openRedis(ctx context.Context, url string) (recorder.Store, error) {
	return nil, errors.New("the Redis backend is not built yet; use --data")
}
