package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/redisstore"
)

// openRedis opens the Redis store at url: redis://, rediss:// (TLS), or
// redis+cluster://host1:port1,host2:port2 (rediss+cluster:// with TLS) for
// a Redis Cluster. With retention > 0, finished episodes expire that long
// after they finish.
func openRedis(ctx context.Context, url string, retention time.Duration, lg *slog.Logger) (recorder.Store, error) {
	return openRedisOpts(ctx, url, redisstore.Options{Retention: retention, Logger: lg})
}

// openRedisOpts is openRedis with every store option given.
func openRedisOpts(ctx context.Context, url string, opts redisstore.Options) (recorder.Store, error) {
	// go-redis logs dial failures through a global logger; send them to
	// ours (they never hold credentials: URLs are not logged).
	redis.SetLogger(redisLogger{opts.Logger})
	return redisstore.Open(ctx, url, opts)
}

type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(_ context.Context, format string, v ...any) {
	if r.l != nil {
		r.l.Debug("redis client", "detail", fmt.Sprintf(format, v...))
	}
}
