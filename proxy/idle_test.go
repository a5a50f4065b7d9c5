package proxy

import (
	"testing"
	"time"
)

// TestIdleTimer drives fire by hand (the timer's own duration is an hour) to
// check its decisions without depending on the scheduler, then lets a short
// real timer expire.
func TestIdleTimer(t *testing.T) {
	t.Parallel()
	calls := 0
	it := newIdleTimer(time.Hour, func() { calls++ })
	defer it.stop()

	it.touch()
	it.fire() // active a moment ago: re-arms, does not call
	if calls != 0 {
		t.Fatalf("called %d times while active", calls)
	}
	it.mu.Lock()
	it.start = it.start.Add(-2 * time.Hour) // the last touch is now 2h old
	it.mu.Unlock()
	it.fire()
	it.fire() // once only
	if calls != 1 {
		t.Fatalf("called %d times after an idle hour, want 1", calls)
	}

	stopped := newIdleTimer(time.Hour, func() { calls++ })
	stopped.stop()
	stopped.mu.Lock()
	stopped.start = stopped.start.Add(-2 * time.Hour)
	stopped.mu.Unlock()
	stopped.fire()
	if calls != 1 {
		t.Fatal("called after stop")
	}

	fired := make(chan struct{})
	short := newIdleTimer(10*time.Millisecond, func() { close(fired) })
	defer short.stop()
	select {
	case <-fired:
	case <-time.After(30 * time.Second):
		t.Fatal("a 10ms idle timer never fired")
	}
}
