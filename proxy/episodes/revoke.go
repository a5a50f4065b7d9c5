package episodes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/orchard-rl/orchard/recorder"
)

// ErrTokenRevoked is wrapped by [Handler.Verify]'s error for the token of
// an episode that finished or no longer exists.
var ErrTokenRevoked = errors.New("episode token is revoked: its episode has finished or does not exist")

// Verify checks credential, an API key a client presented to the proxy.
// It returns the episode of a valid episode token; "" and nil when
// credential is no episode token (a harness's own key); and an error whose
// text says why otherwise: forged ([ErrTokenInvalid]), expired
// ([ErrTokenExpired]) or revoked ([ErrTokenRevoked]). It implements the
// proxy's verifier and may ask the store, for at most 250 ms. Outside
// [Handler.Start] and [Handler.Close] it refuses every credential.
func (h *Handler) Verify(ctx context.Context, credential string) (string, error) {
	if h.state.Load() != started {
		return "", errNotRunning
	}
	ep, err := h.opts.Signer.Verify(credential)
	switch {
	case errors.Is(err, ErrNotToken):
		return "", nil
	case err != nil:
		return "", err
	case h.revoked(ctx, ep):
		return "", fmt.Errorf("episode %s: %w", ep, ErrTokenRevoked)
	}
	return ep, nil
}

// runningRecheck is how long a replica trusts that an episode it saw running
// still is; a token of an episode finished on another replica is refused
// here at most this much later.
const runningRecheck = time.Second

// revocationDeadline bounds the store lookup of a revocation check, so that
// a paused store adds at most this much to a call (it once added 35-40 s).
const revocationDeadline = 250 * time.Millisecond

// revoked reports whether episode's tokens are revoked: it has finished or
// no longer exists. When the store cannot answer within revocationDeadline
// the check fails closed, except for an episode this replica has seen
// running (its token was good then, and finishes seen here are cached).
func (h *Handler) revoked(ctx context.Context, episode string) bool {
	if h.finished.has(episode) {
		return true
	}
	h.mu.Lock()
	seen, ok := h.running[episode]
	h.mu.Unlock()
	if ok && time.Since(seen) < runningRecheck {
		return false
	}
	lctx, cancel := context.WithTimeout(ctx, revocationDeadline)
	defer cancel()
	sum, err := h.opts.Store.Episode(lctx, episode)
	switch {
	case errors.Is(err, recorder.ErrNotFound):
		return true
	case err != nil:
		return !ok
	case sum.Finished():
		h.noteFinished(episode)
		h.mu.Lock()
		delete(h.running, episode)
		h.mu.Unlock()
		return true
	}
	h.mu.Lock()
	if len(h.running) > 1<<16 {
		clear(h.running)
	}
	h.running[episode] = time.Now()
	h.mu.Unlock()
	return false
}

// finishedCache remembers episodes known to be finished, whose tokens are
// revoked. Finished is final, so entries never go stale; the cache is
// bounded by dropping everything when full (a miss only costs a lookup).
type finishedCache struct {
	mu  sync.Mutex // guards following
	ids map[string]struct{}
	max int
}

func newFinishedCache(max int) *finishedCache {
	return &finishedCache{ids: make(map[string]struct{}), max: max}
}

func (c *finishedCache) add(id string) {
	c.mu.Lock()
	if len(c.ids) >= c.max {
		clear(c.ids)
	}
	c.ids[id] = struct{}{}
	c.mu.Unlock()
}

func (c *finishedCache) has(id string) bool {
	c.mu.Lock()
	_, ok := c.ids[id]
	c.mu.Unlock()
	return ok
}
