package loadgen

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Load says how requests are issued and for how long.
type Load struct {
	// Concurrency is the closed-loop client count: each client sends its
	// next request when the last one ends (wrk's model). Ignored when Rate
	// is set.
	Concurrency int
	// Rate, when > 0, selects the open loop: requests start every 1/Rate s
	// whatever the latency (vegeta's model), and latency counts from the
	// due time, so a stall is not hidden (no coordinated omission).
	Rate float64
	// Warmup runs before the measured window; closed-loop clients start
	// spread over its first half. Its requests count only as errors if they
	// fail.
	Warmup time.Duration
	// Duration is the measured window: requests that end inside it are the
	// samples; throughput is their count over the window.
	Duration time.Duration
	// Grace bounds how long requests in flight at the end of the window may
	// take to finish; later ones are cut and count as timeouts. Default 30s.
	Grace time.Duration
	// RequestTimeout bounds one request. Default 60s.
	RequestTimeout time.Duration
	// MaxInFlight caps the open loop's requests in flight; a request due
	// beyond it is dropped and counts as an error. Default 4096.
	MaxInFlight int
	// Run prefixes the episode ids, so that runs do not share episodes.
	Run string
	// Mark, when set, is called as the measured window starts (end false)
	// and ends (end true), to snapshot process counters.
	Mark func(end bool)
	// Create and Finish, when set, are called by a closed-loop client
	// before an episode's first turn and after its last (the open loop
	// sends an episode's turns concurrently and calls neither); an error
	// counts as a Lifecycle outcome.
	Create, Finish func(ctx context.Context, episode string) error
}

func (l *Load) defaults() {
	if l.Grace <= 0 {
		l.Grace = 30 * time.Second
	}
	if l.RequestTimeout <= 0 {
		l.RequestTimeout = 60 * time.Second
	}
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = 4096
	}
	if l.Concurrency <= 0 {
		l.Concurrency = 1
	}
}

// Measurement is what one [Run] observed.
type Measurement struct {
	Window   time.Duration    // actual length of the measured window
	Samples  []Result         // OK requests that ended inside the window
	Outcomes [numOutcomes]int // every request, warm-up and drain included
	Errors   []string         // the first few error details
}

// maxErrorDetails bounds Measurement.Errors.
const maxErrorDetails = 10

// runner is one Run's shared state.
type runner struct {
	c     *Client
	l     Load
	turns int
	stop  time.Time // no request starts at or after it

	mu      sync.Mutex // guards following
	results []Result
	m       Measurement
}

// Run drives c with l and returns the measurement. It returns when every
// request has ended, at most Warmup+Duration+Grace after it started.
func Run(ctx context.Context, c *Client, l Load) *Measurement {
	l.defaults()
	r := &runner{c: c, l: l, turns: len(c.want)}
	begin := time.Now()
	r.stop = begin.Add(l.Warmup + l.Duration)
	reqCtx, cancel := context.WithDeadline(ctx, r.stop.Add(l.Grace))
	defer cancel()

	var wg sync.WaitGroup
	if l.Rate > 0 {
		wg.Add(1)
		go r.schedule(reqCtx, &wg)
	} else {
		for w := range l.Concurrency {
			wg.Add(1)
			go r.client(reqCtx, &wg, w)
		}
	}
	sleepUntil(ctx, begin.Add(l.Warmup))
	t0 := time.Now()
	if l.Mark != nil {
		l.Mark(false)
	}
	sleepUntil(ctx, r.stop)
	t1 := time.Now()
	if l.Mark != nil {
		l.Mark(true)
	}
	wg.Wait()
	r.m.Window = t1.Sub(t0)
	for _, res := range r.results {
		if end := res.Start.Add(res.Total); !end.Before(t0) && !end.After(t1) {
			r.m.Samples = append(r.m.Samples, res)
		}
	}
	return &r.m
}

func (r *runner) add(res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m.Outcomes[res.Outcome]++
	if res.Outcome == OK {
		r.results = append(r.results, res)
	} else if len(r.m.Errors) < maxErrorDetails {
		r.m.Errors = append(r.m.Errors, res.Outcome.String()+": "+res.Err)
	}
}

// client is one closed-loop client: it plays episodes turn by turn until
// the window ends.
func (r *runner) client(ctx context.Context, wg *sync.WaitGroup, w int) {
	defer wg.Done()
	// Ramp up over the first half of the warm-up, so that clients of long
	// (paced) streams do not start, and then end, in lockstep waves.
	if !sleep(ctx, r.l.Warmup/2*time.Duration(w)/time.Duration(r.l.Concurrency)) {
		return
	}
	var b Buffers
	for ep := 0; ; ep++ {
		id := episodeID(r.l.Run, w, ep)
		r.lifecycle(ctx, r.l.Create, id)
		for k := range r.turns {
			now := time.Now()
			if !now.Before(r.stop) || ctx.Err() != nil {
				return
			}
			r.add(r.do(ctx, &b, id, k, now))
		}
		r.lifecycle(ctx, r.l.Finish, id)
	}
}

// lifecycle calls f (Load.Create or Load.Finish) for episode, if set.
func (r *runner) lifecycle(ctx context.Context, f func(context.Context, string) error, episode string) {
	if f == nil || ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.l.RequestTimeout)
	defer cancel()
	if err := f(ctx, episode); err != nil && ctx.Err() == nil {
		r.add(Result{Start: time.Now(), Outcome: Lifecycle, Err: err.Error()})
	}
}

func (r *runner) do(ctx context.Context, b *Buffers, episode string, k int, start time.Time) Result {
	ctx, cancel := context.WithTimeout(ctx, r.l.RequestTimeout)
	defer cancel()
	return r.c.Do(ctx, b, episode, k, start)
}

// schedule is the open loop: request i is due at begin + i/Rate and plays
// turn i%turns of episode i/turns.
func (r *runner) schedule(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	interval := time.Duration(float64(time.Second) / r.l.Rate)
	begin := time.Now()
	var inflight atomic.Int64
	var reqs sync.WaitGroup
	defer reqs.Wait()
	for i := 0; ; i++ {
		due := begin.Add(time.Duration(i) * interval)
		if !due.Before(r.stop) || !sleepUntil(ctx, due) {
			return
		}
		if inflight.Load() >= int64(r.l.MaxInFlight) {
			r.add(Result{Start: due, Outcome: Dropped, Err: fmt.Sprintf("%d requests in flight", r.l.MaxInFlight)})
			continue
		}
		inflight.Add(1)
		reqs.Add(1)
		go r.openRequest(ctx, &reqs, &inflight, i, due)
	}
}

func (r *runner) openRequest(ctx context.Context, wg *sync.WaitGroup, inflight *atomic.Int64, i int, due time.Time) {
	defer wg.Done()
	defer inflight.Add(-1)
	var b Buffers
	r.add(r.do(ctx, &b, episodeID(r.l.Run, 0, i/r.turns), i%r.turns, due))
}

// sleepUntil waits until t unless ctx ends first; it reports whether ctx
// is still live.
func sleepUntil(ctx context.Context, t time.Time) bool {
	return sleep(ctx, time.Until(t))
}
