package redisstore

import (
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/orchard-rl/orchard/recorder"
)

// episodeEncoder is one episode's dedup state in this store. Its mutex is
// held from encoding a batch until Redis has answered, so that the
// encoder's idea of what is stored never runs ahead of the log.
type episodeEncoder struct {
	id string

	mu  sync.Mutex // guards following
	enc *recorder.EpisodeEncoder
	inc string // incarnation enc's state belongs to; "" when it has none
	// pos is the log length enc's state was built on (0: it names no
	// stored call) and last the SHA-1 (hex) of the frame at pos-1. The
	// write script checks that frame is still there: the log only grows,
	// so then everything enc may reference is stored.
	pos  int64
	last string

	size int    // Bytes of enc when last sized; guarded by encoders.mu
	used uint64 // encoders.tick when last got; guarded by encoders.mu
}

// resetLocked forgets the state: the next write starts from a fresh encoder
// (and, if Redis holds calls, rebuilds from them).
func (e *episodeEncoder) resetLocked() { e.enc, e.inc, e.pos, e.last = nil, "", 0, "" }

// encoders is an LRU of per-episode encoders, bounding their memory. An
// entry evicted while in use finishes its write; its state is then lost,
// which costs a rebuild, never correctness: any encoder whose view matches
// Redis may write, which is also what lets several replicas write one
// episode.
type encoders struct {
	max, maxBytes int
	rebuilt       atomic.Uint64 // encoders rebuilt from stored frames

	mu       sync.Mutex // guards following
	m        map[string]*list.Element
	lru      *list.List // of *episodeEncoder, most recent first
	bytes    int        // sum of the entries' size
	evicted  uint64     // entries dropped by the bounds
	finished recorder.FinishedEncoders
	tick     uint64 // gets so far
	idle     recorder.IdleEncoders
	compacts uint64 // encoders compacted as idle
}

func newEncoders(max, maxBytes int) *encoders {
	return &encoders{max: max, maxBytes: maxBytes, m: map[string]*list.Element{}, lru: list.New(),
		idle: recorder.IdleEncoders{Max: max}}
}

// removeLocked drops the entry el.
func (c *encoders) removeLocked(el *list.Element) {
	e := c.lru.Remove(el).(*episodeEncoder)
	delete(c.m, e.id)
	c.bytes -= e.size
}

// sized records that e's encoder now holds n bytes, then drops the least
// recently used entries while the sum is over maxBytes (the most recent
// stays). An entry already dropped is not counted.
func (c *encoders) sized(e *episodeEncoder, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.m[e.id]; el == nil || el.Value != e {
		return
	}
	c.resizeLocked(e, n)
	for c.bytes > c.maxBytes && c.lru.Len() > 1 {
		c.evictLocked()
	}
}

// evictLocked drops the least recently used entry to keep a bound.
func (c *encoders) evictLocked() {
	c.removeLocked(c.lru.Back())
	c.evicted++
}

func (c *encoders) stats() recorder.DedupStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return recorder.DedupStats{Episodes: c.lru.Len(), Bytes: c.bytes, Evictions: c.evicted, Rebuilds: c.rebuilt.Load(),
		Compactions: c.compacts}
}

// get returns the episode's encoder entry, creating it, and marks it used.
func (c *encoders) get(id string) *episodeEncoder {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tick++
	if el := c.m[id]; el != nil {
		c.lru.MoveToFront(el)
		e := el.Value.(*episodeEncoder)
		e.used = c.tick
		return e
	}
	e := &episodeEncoder{id: id, used: c.tick}
	c.m[id] = c.lru.PushFront(e)
	for c.lru.Len() > c.max {
		c.evictLocked()
	}
	return e
}

// resizeLocked notes that e's encoder now holds n bytes.
func (c *encoders) resizeLocked(e *episodeEncoder, n int) {
	c.bytes += n - e.size
	e.size = n
}

// drop forgets an episode's entry (after DeleteEpisode).
func (c *encoders) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(id)
}

func (c *encoders) dropLocked(id string) {
	if el := c.m[id]; el != nil {
		c.removeLocked(el)
	}
}

// finish notes that an episode finished: its entry goes once
// recorder.FinishGrace more calls are written (see wrote); one without an
// entry has nothing to keep.
func (c *encoders) finish(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[id] != nil {
		c.finished.Finished(id, c.dropLocked)
	}
}

// wrote notes that n calls were written, dropping the entries of finished
// episodes whose grace is over.
func (c *encoders) wrote(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finished.Wrote(n, c.dropLocked)
	c.compactIdleLocked()
}

// compactIdleLocked compacts the encoders of the episodes c.idle finds
// idle, when a look is due: from the least recently used entry on,
// skipping an encoder in use.
func (c *encoders) compactIdleLocked() {
	if !c.idle.Due(c.tick) {
		return
	}
	for el := c.lru.Back(); el != nil; el = el.Prev() {
		e := el.Value.(*episodeEncoder)
		if !c.idle.Idle(c.tick, e.used) {
			return
		}
		if !e.mu.TryLock() {
			continue
		}
		if e.enc != nil && e.enc.Compact() {
			c.resizeLocked(e, e.enc.Bytes())
			c.compacts++
		}
		e.mu.Unlock()
	}
}
