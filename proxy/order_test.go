package proxy

import (
	"slices"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

func TestArrivalsOrder(t *testing.T) {
	mk := func(ep string) *exchange {
		x := &exchange{}
		x.att.episode = ep
		return x
	}
	a := newArrivals()
	var got []string
	release := func(c *recorder.Call) { got = append(got, c.CallID) }
	call := func(id string) *recorder.Call { return &recorder.Call{CallID: id} }

	// 1 was answered before 2 arrived, but 2's record is ready first:
	// 2 waits for 1.
	x1, x2, y1 := mk("a"), mk("a"), mk("b")
	a.begin(x1)
	x1.answered.Store(true)
	a.begin(x2)
	a.begin(y1)
	x2.answered.Store(true)
	a.submit(x2, call("a2"), release)
	a.submit(y1, call("b1"), release) // another episode is not held up
	if want := []string{"b1"}; !slices.Equal(got, want) {
		t.Fatalf("released %v, want %v", got, want)
	}
	a.submit(x1, call("a1"), release)
	if want := []string{"b1", "a1", "a2"}; !slices.Equal(got, want) {
		t.Fatalf("released %v, want %v", got, want)
	}

	// 3 is still streaming (overlaps 4): 4 does not wait for it.
	got = nil
	x3, x4 := mk("a"), mk("a")
	a.begin(x3)
	a.begin(x4)
	x4.answered.Store(true)
	a.submit(x4, call("a4"), release)
	x3.answered.Store(true)
	a.submit(x3, call("a3"), release)
	if want := []string{"a4", "a3"}; !slices.Equal(got, want) {
		t.Fatalf("released %v, want %v", got, want)
	}
	if len(a.eps) != 0 {
		t.Fatalf("%d episodes left open, want 0", len(a.eps))
	}
}

// TestArrivalsWhenDone: whenDone runs at once for an episode with nothing
// open, else once its last begun exchange is released, after that record,
// and once; another episode's traffic does not run it.
func TestArrivalsWhenDone(t *testing.T) {
	mk := func(ep string) *exchange {
		x := &exchange{}
		x.att.episode = ep
		x.answered.Store(true)
		return x
	}
	a := newArrivals()
	var got []string
	release := func(c *recorder.Call) { got = append(got, c.CallID) }
	call := func(id string) *recorder.Call { return &recorder.Call{CallID: id} }
	done := func(ep string) func() { return func() { got = append(got, "done "+ep) } }

	a.whenDone("idle", done("idle"))
	x1, x2, y1 := mk("a"), mk("a"), mk("b")
	a.begin(x1)
	a.begin(x2)
	a.begin(y1)
	a.whenDone("a", done("a"))
	a.submit(x2, call("a2"), release) // held behind a1
	a.submit(y1, call("b1"), release)
	if want := []string{"done idle", "b1"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	a.submit(x1, call("a1"), release)
	if want := []string{"done idle", "b1", "a1", "a2", "done a"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	x3 := mk("a") // a call after the finish: a fresh entry, nothing left to run
	a.begin(x3)
	a.submit(x3, call("a3"), release)
	if want := []string{"done idle", "b1", "a1", "a2", "done a", "a3"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestArrivalsWhenDoneLaterCall: an exchange that begins after whenDone
// does not hold it up, even when it begins while the releasing worker is
// still handing out the records that whenDone waited for (the worker then
// runs whenDone before that exchange's record), and an exchange that began
// before it does.
func TestArrivalsWhenDoneLaterCall(t *testing.T) {
	mk := func() *exchange {
		x := &exchange{}
		x.att.episode = "a"
		x.answered.Store(true)
		return x
	}
	a := newArrivals()
	var got []string
	call := func(id string) *recorder.Call { return &recorder.Call{CallID: id} }
	x1, x2, x3 := mk(), mk(), mk()
	x2.answered.Store(false) // still streaming: later records do not wait for it
	a.begin(x1)
	release := func(c *recorder.Call) {
		got = append(got, c.CallID)
		if c.CallID == "a1" { // the episode finishes and a late call arrives
			a.whenDone("a", func() { got = append(got, "done a") })
			a.begin(x2)
		}
	}
	a.submit(x1, call("a1"), release)
	if want := []string{"a1", "done a"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v: the later call held whenDone up", got, want)
	}
	a.whenDone("a", func() { got = append(got, "done a again") }) // x2 is open: waits for it
	a.begin(x3)
	a.submit(x3, call("a3"), release)
	if want := []string{"a1", "done a", "a3"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	a.submit(x2, call("a2"), release)
	if want := []string{"a1", "done a", "a3", "a2", "done a again"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if len(a.eps) != 0 {
		t.Fatalf("%d episodes left open, want 0", len(a.eps))
	}
}
