package lineage

import (
	"container/list"
	"sync"

	"github.com/orchard-rl/orchard/recorder"
)

// DefaultMaxBytes is the memory a [Tracker] keeps episode state in when
// [Options.MaxBytes] is zero: 64 MiB, e.g. 500 agent episodes at a
// 30,000-token context.
const DefaultMaxBytes = 64 << 20

// Options configures a [Tracker].
type Options struct {
	// MaxBytes bounds the memory of the episodes' state, as [Tracker.Bytes]
	// estimates it: past it the least recently observed episodes are
	// forgotten (never the one just observed), and the next call of a
	// forgotten episode starts over as a root. Zero means DefaultMaxBytes;
	// negative means no bound (for offline use).
	MaxBytes int64
}

// Tracker classifies the calls of many episodes as they arrive. It is safe
// for concurrent use; calls of one episode are classified one at a time, in
// the order Observe is called for them.
type Tracker struct {
	max int64

	mu    sync.Mutex // guards following
	eps   map[string]*list.Element
	lru   list.List // of *episode, most recently observed first
	bytes int64     // sum of the episodes' accounted sizes
}

// NewTracker returns an empty Tracker.
func NewTracker(opts Options) *Tracker {
	n := opts.MaxBytes
	if n == 0 {
		n = DefaultMaxBytes
	}
	return &Tracker{max: n, eps: make(map[string]*list.Element)}
}

// Observe classifies c against the earlier calls of c.EpisodeID and records
// it for the calls that follow. It reports false, recording nothing, when
// c.API is not one of chat.completions, completions, responses or messages
// (count_tokens, embeddings, models make no turn). Observing a CallID the
// episode has seen before returns the first result and records nothing, so
// a replayed record cannot become its own parent. Observe neither modifies
// c nor keeps references into it; the caller stores the result in
// c.Lineage if it wishes.
func (t *Tracker) Observe(c *recorder.Call) (recorder.Lineage, bool) {
	if c == nil {
		return recorder.Lineage{}, false
	}
	ep := t.episode(c.EpisodeID)
	ep.mu.Lock()
	lin, ok := ep.observeLocked(c)
	size := ep.bytesLocked()
	ep.mu.Unlock()
	t.account(ep, size)
	return lin, ok
}

// Forget drops the state of an episode, e.g. once it has finished.
func (t *Tracker) Forget(episodeID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.eps[episodeID]; ok {
		t.removeLocked(el)
	}
}

// Len returns the number of episodes with state.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.eps)
}

// Bytes returns the estimated memory of the episodes' state: token ids at
// 4 bytes, message hashes at 8 and completions text at 1 per unit kept in
// thread tips, plus index entries and a fixed cost per episode and call.
func (t *Tracker) Bytes() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bytes
}

func (t *Tracker) episode(id string) *episode {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.eps[id]; ok {
		t.lru.MoveToFront(el)
		return el.Value.(*episode)
	}
	ep := newEpisode(id)
	ep.size = episodeOverhead
	t.bytes += ep.size
	t.eps[id] = t.lru.PushFront(ep)
	t.evictLocked()
	return ep
}

// account records ep's new size and evicts past the budget. An episode
// evicted while it was being observed is not counted again.
func (t *Tracker) account(ep *episode, size int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.eps[ep.id]; !ok || el.Value.(*episode) != ep {
		return
	}
	t.bytes += size - ep.size
	ep.size = size
	t.evictLocked()
}

// evictLocked forgets least recently observed episodes until the total
// fits, keeping the most recent one whatever its size.
func (t *Tracker) evictLocked() {
	for t.max > 0 && t.bytes > t.max && t.lru.Len() > 1 {
		t.removeLocked(t.lru.Back())
	}
}

func (t *Tracker) removeLocked(el *list.Element) {
	ep := el.Value.(*episode)
	t.lru.Remove(el)
	delete(t.eps, ep.id)
	t.bytes -= ep.size
}

// Classify classifies calls offline, in slice order, with the same rules
// as [Tracker.Observe]; calls may belong to several episodes. The result is
// aligned with calls: a call Observe would report false for gets the zero
// Lineage (Kind "").
func Classify(calls []*recorder.Call) []recorder.Lineage {
	t := NewTracker(Options{MaxBytes: -1})
	out := make([]recorder.Lineage, len(calls))
	for i, c := range calls {
		out[i], _ = t.Observe(c)
	}
	return out
}
