package proxy

import (
	"context"
	"log/slog"
	"time"
)

// FinishFeed carries episode finishes between proxy replicas that share a
// store, so that a token is refused on every replica as soon as its
// episode finished on one, even while the store is slow or paused. The
// Redis store implements it with pub/sub.
type FinishFeed interface {
	// PublishFinished tells every subscribed replica that episode finished.
	PublishFinished(ctx context.Context, episode string) error
	// SubscribeFinished calls finished with each published id until ctx is
	// done. It calls resync each time the subscription is established (the
	// first time included) or lost: finishes published in between may have
	// been missed.
	SubscribeFinished(ctx context.Context, finished func(episode string), resync func()) error
}

// publishDeadline bounds the publish of a finish; the finish is stored
// before, so a failed publish only leaves the other replicas to the store.
const publishDeadline = time.Second

// startFeed subscribes to feed, when set, until stopFeed.
func (a *episodeAPI) startFeed(feed FinishFeed, lg *slog.Logger) {
	a.feed, a.log = feed, lg
	if feed == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.stopSub = cancel
	a.subDone = make(chan struct{})
	go func() {
		defer close(a.subDone)
		if err := feed.SubscribeFinished(ctx, a.finished.add, a.forgetRunning); err != nil && ctx.Err() == nil {
			lg.Error("finish feed stopped", "err", err)
		}
	}()
}

// stopFeed ends the subscription started by startFeed and waits for it.
func (a *episodeAPI) stopFeed() {
	if a == nil || a.stopSub == nil {
		return
	}
	a.stopSub()
	<-a.subDone
}

// forgetRunning drops what this replica saw running, so that each episode
// is looked up again: called when finishes may have been missed.
func (a *episodeAPI) forgetRunning() {
	a.mu.Lock()
	clear(a.running)
	a.mu.Unlock()
}

// publishFinished tells the other replicas that id finished.
func (a *episodeAPI) publishFinished(ctx context.Context, id string) {
	if a.feed == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishDeadline)
	defer cancel()
	if err := a.feed.PublishFinished(ctx, id); err != nil {
		a.log.Warn("publish finish; other replicas learn it from the store", "episode", id, "err", err)
	}
}
