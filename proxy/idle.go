package proxy

import (
	"sync"
	"sync/atomic"
	"time"
)

// idleTimer calls its function once nothing has been seen for its duration.
// Streams report every read through touch; resetting a runtime timer on
// each of a stream's hundreds of reads cost more than the rest of the tee,
// so touch only stores a time, and the timer, when it fires early, checks
// that time and waits for the remainder.
type idleTimer struct {
	d       time.Duration
	fn      func()
	last    atomic.Int64 // monotonic nanoseconds since start of the last activity
	start   time.Time
	mu      sync.Mutex // orders the timer's creation before its callbacks
	t       *time.Timer
	stopped bool
}

func newIdleTimer(d time.Duration, fn func()) *idleTimer {
	it := &idleTimer{d: d, fn: fn, start: time.Now()}
	it.mu.Lock()
	it.t = time.AfterFunc(d, it.fire)
	it.mu.Unlock()
	return it
}

// touch records activity now.
func (it *idleTimer) touch() { it.last.Store(int64(time.Since(it.start))) }

func (it *idleTimer) fire() {
	it.mu.Lock()
	if it.stopped {
		it.mu.Unlock()
		return
	}
	idle := time.Since(it.start) - time.Duration(it.last.Load())
	if idle < it.d {
		it.t.Reset(it.d - idle)
		it.mu.Unlock()
		return
	}
	it.stopped = true
	it.mu.Unlock()
	it.fn() // outside the lock: fn may end the exchange, which stops the timer
}

// stop ends the timer. fn is not called after stop returns, unless it had
// already begun.
func (it *idleTimer) stop() {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.stopped = true
	it.t.Stop()
}
