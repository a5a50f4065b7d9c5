package proxy

import (
	"sync"

	"github.com/orchard-rl/orchard/recorder"
)

// arrivals hands records to the lineage tracker and the sink in the order
// their calls arrived, per episode, as far as that order matters. Records
// are assembled by several workers, so a call's record can be ready before
// the record of the call that preceded it; the tracker must see the earlier
// one first, or a continuation looks like a new thread. A record therefore
// waits for earlier calls of its episode whose upstream response had
// already ended (their records are moments away). An earlier call still
// streaming overlaps this one, so neither can continue the other and the
// record does not wait for it. No worker ever blocks: whichever worker
// makes records releasable releases them.
type arrivals struct {
	mu  sync.Mutex // guards following
	eps map[string]*episodeArrivals
}

type episodeArrivals struct {
	open      []*exchange // begun and not yet released, in arrival order
	held      map[*exchange]*recorder.Call
	releasing bool     // a worker is releasing this episode's records
	next      uint64   // the arrival number of the next exchange to begin
	done      []waiter // see whenDone
}

// waiter is a whenDone callback, due once every exchange that began before
// it (arrival below after) is released.
type waiter struct {
	after uint64
	f     func()
}

func newArrivals() *arrivals { return &arrivals{eps: make(map[string]*episodeArrivals)} }

// begin registers a recorded exchange as it arrives.
func (a *arrivals) begin(x *exchange) {
	a.mu.Lock()
	ep := a.eps[x.att.episode]
	if ep == nil {
		ep = &episodeArrivals{held: make(map[*exchange]*recorder.Call)}
		a.eps[x.att.episode] = ep
	}
	x.arrival = ep.next
	ep.next++
	ep.open = append(ep.open, x)
	a.mu.Unlock()
}

// submit offers the finished record c of x and calls release, in order,
// for every record that may go now (c's or others held before).
func (a *arrivals) submit(x *exchange, c *recorder.Call, release func(*recorder.Call)) {
	a.mu.Lock()
	ep := a.eps[x.att.episode]
	ep.held[x] = c
	if ep.releasing {
		a.mu.Unlock() // that worker will release c too
		return
	}
	ep.releasing = true
	for {
		ready := ep.takeReady()
		if len(ready) == 0 {
			ep.releasing = false
			if len(ep.open) == 0 {
				delete(a.eps, x.att.episode)
			}
			done := ep.takeDue()
			a.mu.Unlock()
			for _, w := range done {
				w.f()
			}
			return
		}
		a.mu.Unlock()
		for _, r := range ready {
			release(r)
		}
		a.mu.Lock()
	}
}

// whenDone calls f once every exchange of episode that has begun is
// released (its record classified and handed to the sink): at once if none
// is open, else from the worker that releases the last of them. Exchanges
// that begin after whenDone do not hold f up.
func (a *arrivals) whenDone(episode string, f func()) {
	a.mu.Lock()
	ep := a.eps[episode]
	if ep == nil {
		a.mu.Unlock()
		f()
		return
	}
	ep.done = append(ep.done, waiter{after: ep.next, f: f})
	a.mu.Unlock()
}

// takeDue removes and returns the waiters whose exchanges are all
// released; the releasing worker calls it when it has released all it
// could.
func (ep *episodeArrivals) takeDue() []waiter {
	oldest := ep.next // of the exchanges still open
	if len(ep.open) > 0 {
		oldest = ep.open[0].arrival
	}
	var due []waiter
	keep := ep.done[:0]
	for _, w := range ep.done {
		if w.after <= oldest {
			due = append(due, w)
		} else {
			keep = append(keep, w)
		}
	}
	clear(ep.done[len(keep):])
	ep.done = keep
	return due
}

// takeReady removes and returns, in arrival order, the held records that
// no earlier, already answered call is still holding up.
func (ep *episodeArrivals) takeReady() []*recorder.Call {
	var ready []*recorder.Call
	keep := ep.open[:0]
	blocked := false
	for _, e := range ep.open {
		c, held := ep.held[e]
		switch {
		case held && !blocked:
			ready = append(ready, c)
			delete(ep.held, e)
			continue
		case !held && e.answered.Load():
			blocked = true // its record is on its way: everything later waits
		}
		keep = append(keep, e)
	}
	clear(ep.open[len(keep):])
	ep.open = keep
	return ready
}
