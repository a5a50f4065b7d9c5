package lineage

import (
	"container/list"
	"sync"

	"github.com/orchard-rl/orchard/recorder"
)

// DefaultMaxEpisodes is the number of episodes a [Tracker] keeps state for
// when [Options.MaxEpisodes] is zero.
const DefaultMaxEpisodes = 1024

// Options configures a [Tracker].
type Options struct {
	// MaxEpisodes bounds how many episodes keep state; past it the least
	// recently observed episode is forgotten, and its next call starts
	// over as a root. Zero means DefaultMaxEpisodes; negative means no
	// bound (for offline use).
	MaxEpisodes int
}

// Tracker classifies the calls of many episodes as they arrive. It is safe
// for concurrent use; calls of one episode are classified one at a time, in
// the order Observe is called for them.
type Tracker struct {
	max int

	mu  sync.Mutex // guards following
	eps map[string]*list.Element
	lru list.List // of *episode, most recently observed first
}

// NewTracker returns an empty Tracker.
func NewTracker(opts Options) *Tracker {
	n := opts.MaxEpisodes
	if n == 0 {
		n = DefaultMaxEpisodes
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
	defer ep.mu.Unlock()
	return ep.observeLocked(c)
}

// Forget drops the state of an episode, e.g. once it has finished.
func (t *Tracker) Forget(episodeID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.eps[episodeID]; ok {
		t.lru.Remove(el)
		delete(t.eps, episodeID)
	}
}

// Len returns the number of episodes with state.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.eps)
}

func (t *Tracker) episode(id string) *episode {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.eps[id]; ok {
		t.lru.MoveToFront(el)
		return el.Value.(*episode)
	}
	ep := newEpisode(id)
	t.eps[id] = t.lru.PushFront(ep)
	if t.max > 0 && t.lru.Len() > t.max {
		old := t.lru.Back()
		t.lru.Remove(old)
		delete(t.eps, old.Value.(*episode).id)
	}
	return ep
}

// Classify classifies calls offline, in slice order, with the same rules
// as [Tracker.Observe]; calls may belong to several episodes. The result is
// aligned with calls: a call Observe would report false for gets the zero
// Lineage (Kind "").
func Classify(calls []*recorder.Call) []recorder.Lineage {
	t := NewTracker(Options{MaxEpisodes: -1})
	out := make([]recorder.Lineage, len(calls))
	for i, c := range calls {
		out[i], _ = t.Observe(c)
	}
	return out
}
