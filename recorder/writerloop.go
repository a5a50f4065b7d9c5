package recorder

import (
	"context"
	"time"
)

// flight is one store write running on its own goroutine, so that the
// writer loop can keep spilling while a slow store holds it.
type flight struct {
	calls   []*Call
	replay  bool   // the calls come from the spill file
	next    int64  // replay: spill offset to advance to on success
	held    uint64 // replay from the spill's in-memory backlog: seq to acknowledge
	spilled bool   // the calls were also spilled because the write was slow
	err     error
}

// writerLoop is the state of the pipeline's writer goroutine; only that
// goroutine touches it.
type writerLoop struct {
	p       *Pipeline
	batch   []*Call
	fl      *flight      // write in progress, nil if none
	results chan *flight // the finished flight

	batchT, slowT, retryT *time.Timer
	batchC, slowC, retryC <-chan time.Time // nil while the timer is not armed
}

func newWriterLoop(p *Pipeline) *writerLoop {
	stopped := func() *time.Timer { t := time.NewTimer(time.Hour); t.Stop(); return t }
	return &writerLoop{p: p, results: make(chan *flight, 1), batchT: stopped(), slowT: stopped(), retryT: stopped()}
}

// run moves calls from the queue to the store or the spill file until ctx
// is done.
func (l *writerLoop) run(ctx context.Context) {
	if l.p.spill.pending() {
		l.p.log.Info("replaying leftover spill file")
		l.replay()
	}
	sync := time.NewTicker(l.p.opts.SyncInterval)
	defer sync.Stop()
	for {
		// A full batch leaves the rest in the queue, where QueueBytes
		// bounds it (and overflows to the spill file).
		queue := l.p.queue
		if len(l.batch) >= l.flightMax() {
			queue = nil
		}
		select {
		case <-ctx.Done():
			return
		case c := <-queue:
			l.take(l.p.dequeue(c))
		case <-l.batchC:
			l.batchC = nil
			l.flush()
		case f := <-l.results:
			l.finish(f)
		case <-l.slowC:
			l.slowC = nil
			l.onSlow()
		case <-l.retryC:
			l.retryC = nil
			l.replay()
		case <-l.p.kick:
			if l.fl == nil {
				l.armRetry(0)
			}
		case <-sync.C:
			if err := l.p.spill.sync(); err != nil {
				l.p.log.Error("sync spill", "err", err)
			}
		}
	}
}

// take adds a queued call to the batch, or to the spill file while older
// calls wait there (replay order is arrival order).
func (l *writerLoop) take(c *Call) {
	if l.p.spill.pending() {
		l.toSpill(append(l.batch, c))
		l.batch = nil
		if l.fl == nil {
			l.armRetry(l.p.opts.RetryInterval)
		}
		return
	}
	l.batch = append(l.batch, c)
	if len(l.batch) >= l.p.opts.BatchSize {
		l.flush()
	} else if l.batchC == nil {
		l.batchT.Reset(l.p.opts.BatchDelay)
		l.batchC = l.batchT.C
	}
}

// flush sends the batch to the store, unless a write is in flight (the
// batch goes when it lands) or the spill file has calls waiting.
func (l *writerLoop) flush() {
	if l.fl != nil || len(l.batch) == 0 {
		return
	}
	if l.p.spill.pending() {
		l.toSpill(l.batch)
		l.batch = nil
		return
	}
	// Calls that queued up while a write was in flight go in writes of at
	// most flightMax: one unbounded write of a backlog took long enough to
	// trip SlowAfter, which sent everything through the spill file.
	n := min(len(l.batch), l.flightMax())
	l.start(&flight{calls: l.batch[:n:n]})
	l.batch = append([]*Call(nil), l.batch[n:]...) // nil when all went
	if l.batch == nil {
		l.batchC = nil
		l.batchT.Stop()
	}
}

// flightMax is the most calls one store write carries.
func (l *writerLoop) flightMax() int { return 4 * l.p.opts.BatchSize }

func (l *writerLoop) start(f *flight) {
	l.fl = f
	if !f.replay {
		l.slowT.Reset(l.p.opts.SlowAfter)
		l.slowC = l.slowT.C
	}
	go l.write(f)
}

// write runs one store write; its goroutine is owned by the loop, which
// always receives its result (in finish, or in drain).
func (l *writerLoop) write(f *flight) {
	ctx, cancel := context.WithTimeout(context.Background(), l.p.opts.WriteTimeout)
	defer cancel()
	t0 := time.Now()
	f.err = l.p.store.WriteCalls(ctx, f.calls)
	l.p.m.latency.Observe(time.Since(t0).Seconds())
	l.results <- f
}

// finish handles a landed write.
func (l *writerLoop) finish(f *flight) {
	l.fl, l.slowC = nil, nil
	l.slowT.Stop()
	n := float64(len(f.calls))
	switch {
	case f.err == nil && f.held > 0:
		l.p.m.replayed.Add(n)
		l.p.spill.ackBacklog(f.held)
	case f.err == nil && f.replay:
		l.p.m.replayed.Add(n)
		done, err := l.p.spill.advance(f.next)
		if err != nil {
			l.p.log.Error("advance spill", "err", err)
		}
		if done {
			l.p.log.Info("spill replayed; writing to the store again")
		}
	case f.err == nil:
		l.p.m.written.Add(n)
	case f.replay:
		l.p.log.Warn("store still failing; will retry", "err", f.err)
		l.armRetry(l.p.opts.RetryInterval)
		return
	default:
		l.p.log.Warn("store write failed; spilling", "calls", len(f.calls), "err", f.err)
		if !f.spilled {
			l.toSpill(f.calls)
		}
		l.armRetry(l.p.opts.RetryInterval)
		return
	}
	if l.p.spill.pending() {
		l.replay() // the store answers: catch up now
		return
	}
	l.flush()
}

// onSlow spills the calls of a write that is taking too long, so that
// they are on disk whatever the store does; the write itself goes on and
// the replay that follows is a no-op for calls it stored.
func (l *writerLoop) onSlow() {
	if l.fl == nil || l.fl.replay || l.fl.spilled {
		return
	}
	l.p.log.Warn("store write slow; spilling", "calls", len(l.fl.calls), "after", l.p.opts.SlowAfter)
	l.fl.spilled = true
	l.toSpill(append(l.fl.calls[:len(l.fl.calls):len(l.fl.calls)], l.batch...))
	l.batch = nil
}

// replay sends the next batch of spilled calls to the store.
func (l *writerLoop) replay() {
	if l.fl != nil {
		return
	}
	calls, next, err := l.p.spill.next(l.flightMax())
	if err != nil {
		l.p.log.Error("read spill", "err", err)
	}
	if len(calls) == 0 {
		done, err := l.p.spill.advance(next)
		if err != nil {
			l.p.log.Error("advance spill", "err", err)
		}
		if held, seq := l.p.spill.peekBacklog(l.flightMax()); len(held) > 0 && err == nil {
			l.start(&flight{calls: held, replay: true, held: seq})
		} else if !done {
			l.armRetry(l.p.opts.RetryInterval)
		}
		return
	}
	l.start(&flight{calls: calls, replay: true, next: next})
}

func (l *writerLoop) armRetry(d time.Duration) {
	if l.retryC == nil {
		l.retryT.Reset(d)
		l.retryC = l.retryT.C
	}
}

func (l *writerLoop) toSpill(calls []*Call) {
	if len(calls) == 0 {
		return
	}
	if err := l.p.spill.append(calls); err != nil {
		l.p.log.Error("spill calls; holding them in memory", "calls", len(calls), "err", err)
	}
}

// drain stops intake, lands the write in flight, writes what is queued to
// the store (or spills it if the store is failing) and closes the spill.
func (l *writerLoop) drain() error {
	l.p.mu.Lock()
	l.p.stopped = true
	l.p.mu.Unlock()
	l.batchT.Stop()
	l.retryT.Stop()
	for {
		select {
		case c := <-l.p.queue:
			l.batch = append(l.batch, l.p.dequeue(c))
			continue
		default:
		}
		break
	}
	failed := false
	if l.fl != nil {
		f := <-l.results
		l.fl = nil
		l.slowT.Stop()
		failed = l.settle(f)
	}
	for len(l.batch) > 0 && !failed && !l.p.spill.pending() {
		n := min(len(l.batch), l.p.opts.BatchSize)
		f := &flight{calls: l.batch[:n]}
		l.batch = l.batch[n:]
		go l.write(f)
		failed = l.settle(<-l.results)
	}
	l.toSpill(l.batch)
	l.batch = nil
	if !failed {
		l.replayAtShutdown()
	}
	return l.p.spill.close()
}

// replayAtShutdown gives a healthy store a bounded chance to take what is
// in the spill file before the process exits, so that a proxy stopped for
// good leaves its records in the store, where readers see them, rather
// than in the spill file (which the next start would replay anyway).
func (l *writerLoop) replayAtShutdown() {
	deadline := time.Now().Add(l.p.opts.ShutdownReplay)
	for l.p.spill.pending() && time.Now().Before(deadline) {
		calls, next, err := l.p.spill.next(l.flightMax())
		if err != nil {
			l.p.log.Error("read spill at shutdown", "err", err)
			return
		}
		f := &flight{calls: calls, replay: true, next: next}
		if len(calls) == 0 {
			if _, err := l.p.spill.advance(next); err != nil {
				l.p.log.Error("advance spill", "err", err)
			}
			if f.calls, f.held = l.p.spill.peekBacklog(l.flightMax()); len(f.calls) == 0 {
				return
			}
		}
		go l.write(f)
		if l.settle(<-l.results) {
			return // the store fails: the rest waits for the next start
		}
	}
}

// settle accounts for a write landed during drain and reports whether the
// store failed.
func (l *writerLoop) settle(f *flight) bool {
	n := float64(len(f.calls))
	switch {
	case f.err != nil && !f.replay && !f.spilled:
		l.toSpill(f.calls)
	case f.err == nil && f.held > 0:
		l.p.m.replayed.Add(n)
		l.p.spill.ackBacklog(f.held)
	case f.err == nil && f.replay:
		l.p.m.replayed.Add(n)
		if _, err := l.p.spill.advance(f.next); err != nil {
			l.p.log.Error("advance spill", "err", err)
		}
	case f.err == nil:
		l.p.m.written.Add(n)
	}
	return f.err != nil
}
