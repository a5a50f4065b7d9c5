package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// finishes is the pub/sub channel finishes are published on.
func (k keys) finishes() string { return k.prefix + ":finishes" }

// resubscribeBackoff spaces the attempts to re-establish a broken
// subscription.
const resubscribeBackoff = 100 * time.Millisecond

// PublishFinished publishes on the store's finishes channel that episode
// finished. Pub/sub is fire and forget: a subscriber disconnected at the
// time misses it (see [Store.SubscribeFinished]).
func (s *Store) PublishFinished(ctx context.Context, episode string) error {
	if err := s.rdb.Publish(ctx, s.keys.finishes(), episode).Err(); err != nil {
		return fmt.Errorf("publish finish of %s: %w", episode, wrapErr(err))
	}
	return nil
}

// SubscribeFinished calls finished with each episode id published by
// [Store.PublishFinished] until ctx is done, then returns nil. It calls
// resync each time the subscription is confirmed (the first time
// included) and each time it breaks, since ids published in between are
// not delivered again: the caller must treat what it knew as stale.
// A broken subscription is re-established every 100 ms until it holds.
func (s *Store) SubscribeFinished(ctx context.Context, finished func(episode string), resync func()) error {
	ps := s.rdb.Subscribe(ctx, s.keys.finishes())
	defer ps.Close()
	stop := context.AfterFunc(ctx, func() { ps.Close() }) // Receive does not watch ctx
	defer stop()
	for {
		msg, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			resync()
			waitBackoff(ctx)
			continue
		}
		deliver(msg, finished, resync)
	}
}

func deliver(msg any, finished func(string), resync func()) {
	switch m := msg.(type) {
	case *redis.Message:
		finished(m.Payload)
	case *redis.Subscription:
		resync()
	}
}

func waitBackoff(ctx context.Context) {
	t := time.NewTimer(resubscribeBackoff)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
