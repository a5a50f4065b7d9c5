package episodes

import (
	"context"
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

// startFeed subscribes to Options.Finishes, when set, until ctx is done or
// stopFeed.
func (h *Handler) startFeed(ctx context.Context) {
	if h.opts.Finishes == nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	h.stopSub = cancel
	h.subDone = make(chan struct{})
	go h.subscribe(ctx)
}

// subscribe runs the subscription to Options.Finishes until ctx is done.
func (h *Handler) subscribe(ctx context.Context) {
	defer close(h.subDone)
	if err := h.opts.Finishes.SubscribeFinished(ctx, h.noteFinished, h.forgetRunning); err != nil && ctx.Err() == nil {
		h.log.Error("finish feed stopped", "err", err)
	}
}

// stopFeed ends the subscription started by startFeed and waits for it.
func (h *Handler) stopFeed() {
	if h.stopSub == nil {
		return
	}
	h.stopSub()
	<-h.subDone
}

// forgetRunning drops what this replica saw running, so that each episode
// is looked up again: called when finishes may have been missed.
func (h *Handler) forgetRunning() {
	h.mu.Lock()
	clear(h.running)
	h.mu.Unlock()
}

// publishFinished tells the other replicas that id finished.
func (h *Handler) publishFinished(ctx context.Context, id string) {
	if h.opts.Finishes == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishDeadline)
	defer cancel()
	if err := h.opts.Finishes.PublishFinished(ctx, id); err != nil {
		h.log.Warn("publish finish; other replicas learn it from the store", "episode", id, "err", err)
	}
}
