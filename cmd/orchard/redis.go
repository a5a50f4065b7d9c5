package main

import (
	"context"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/redisstore"
)

// openRedis opens the Redis store at url: redis://, rediss:// (TLS), or
// redis+cluster://host1:port1,host2:port2 (rediss+cluster:// with TLS) for
// a Redis Cluster. Episodes are kept until deleted; retention and GC are
// set through [redisstore.Options] by the commands that need them.
func openRedis(ctx context.Context, url string) (recorder.Store, error) {
	return redisstore.Open(ctx, url, redisstore.Options{})
}
