package redisstore

import (
	"container/list"
	"sync"

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
	max int

	mu  sync.Mutex // guards following
	m   map[string]*list.Element
	lru *list.List // of *episodeEncoder, most recent first
}

func newEncoders(max int) *encoders {
	return &encoders{max: max, m: map[string]*list.Element{}, lru: list.New()}
}

// get returns the episode's encoder entry, creating it, and marks it used.
func (c *encoders) get(id string) *episodeEncoder {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.m[id]; el != nil {
		c.lru.MoveToFront(el)
		return el.Value.(*episodeEncoder)
	}
	e := &episodeEncoder{id: id}
	c.m[id] = c.lru.PushFront(e)
	for c.lru.Len() > c.max {
		old := c.lru.Remove(c.lru.Back()).(*episodeEncoder)
		delete(c.m, old.id)
	}
	return e
}

// drop forgets an episode's entry (after DeleteEpisode).
func (c *encoders) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.m[id]; el != nil {
		c.lru.Remove(el)
		delete(c.m, id)
	}
}
