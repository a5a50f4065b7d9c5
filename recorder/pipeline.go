package recorder

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Writer is the part of a [Store] the pipeline needs. WriteCalls must be
// idempotent by CallID: the pipeline may hand it a call again after a
// failure or a slow write.
type Writer interface {
	WriteCalls(ctx context.Context, calls []*Call) error
}

// PipelineOptions configure a [Pipeline]. Zero fields take their defaults.
type PipelineOptions struct {
	// SpillDir holds the spill file (spill.log) and its replay offset
	// (spill.off). Required; use a directory on local disk.
	SpillDir string
	// QueueSize is the most calls the in-memory queue holds. Default 4096.
	QueueSize int
	// QueueBytes bounds the memory the queued calls hold (their bodies and
	// token arrays, estimated): past it, as past QueueSize, calls go to
	// the spill file, so that a store that falls behind costs disk rather
	// than the proxy's memory. A call always enters an empty queue. Beyond
	// the queue, the writer holds at most the calls of the write in flight
	// and of the next one (4*BatchSize each). Default 32 MiB.
	QueueBytes int
	// BatchSize is how many queued calls start a store write at once (else
	// BatchDelay does). Calls that queue up while a write is in flight go
	// in writes of at most 4*BatchSize. Default 64.
	BatchSize int
	// BatchDelay is how long a partial batch waits for more calls. Default 10ms.
	BatchDelay time.Duration
	// SlowAfter is how long a store write may run before its calls (and all
	// that follow until the spill is replayed) also go to the spill file,
	// so that a hung store cannot hold records only in memory. Default 2s:
	// with the CPU saturated (256 streams on 2 cores) a healthy write of a
	// few hundred calls took over 500ms, and spilling then made it worse.
	SlowAfter time.Duration
	// WriteTimeout is the deadline of one store write. Default 10s.
	WriteTimeout time.Duration
	// RetryInterval is how often a failing store is retried. Default 1s.
	RetryInterval time.Duration
	// SyncInterval is how often the spill file is fsynced (group fsync).
	// Default 100ms.
	SyncInterval time.Duration
	// ShutdownReplay bounds how long Start, once its context is done, keeps
	// replaying the spill file into a store that answers. Default 30s.
	ShutdownReplay time.Duration
	// MaxBacklogBytes bounds the calls held in memory when the spill file
	// cannot be written either (a full disk); past it calls are dropped,
	// counted in orchard_recorder_dropped_total and logged. Default 64 MiB.
	MaxBacklogBytes int
	// Logger receives store failures and recoveries. Nil discards.
	Logger *slog.Logger
}

func (o *PipelineOptions) defaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 4096
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = 32 << 20
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 64
	}
	if o.MaxBacklogBytes <= 0 {
		o.MaxBacklogBytes = 64 << 20
	}
	def(&o.BatchDelay, 10*time.Millisecond)
	def(&o.SlowAfter, 2*time.Second)
	def(&o.WriteTimeout, 10*time.Second)
	def(&o.RetryInterval, time.Second)
	def(&o.SyncInterval, 100*time.Millisecond)
	def(&o.ShutdownReplay, 30*time.Second)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Pipeline carries calls from the proxy to a store without making the
// proxy wait and without losing one. [Pipeline.Record] puts a call on a
// bounded queue that a writer goroutine drains in batches. When the queue
// is full, or the store fails or is slow, calls go to an append-only spill
// file instead, which is replayed in order once the store answers again;
// a spill file left by an earlier process is replayed on start-up.
//
// Start runs the writer. Record is safe for concurrent use, before, during
// and after Start.
type Pipeline struct {
	store Writer
	opts  PipelineOptions
	log   *slog.Logger
	queue chan *Call
	// queued is the memory the calls in queue hold (see Call.heldBytes).
	queued atomic.Int64
	kick   chan struct{} // Record spilled a call: replay it soon
	spill  spill
	m      *pipelineMetrics
	drops  atomic.Int64

	mu      sync.RWMutex // guards following
	started bool
	stopped bool // the writer has stopped taking from the queue
}

// NewPipeline returns a pipeline writing to store. It panics if store is
// nil or opts.SpillDir is empty.
func NewPipeline(store Writer, opts PipelineOptions) *Pipeline {
	if store == nil || opts.SpillDir == "" {
		panic("recorder: NewPipeline needs a store and a SpillDir")
	}
	opts.defaults()
	p := &Pipeline{
		store: store, opts: opts, log: opts.Logger,
		queue: make(chan *Call, opts.QueueSize), kick: make(chan struct{}, 1),
		spill: spill{dir: opts.SpillDir, maxBacklog: opts.MaxBacklogBytes},
	}
	p.m = newPipelineMetrics(p)
	p.spill.onWrite = func(n int) { p.m.spilled.Add(float64(n)) }
	p.spill.onDrop = p.dropped
	return p
}

// Collectors returns the pipeline's Prometheus collectors for the caller
// to register: orchard_recorder_{queued,written,spilled,replayed}_total,
// orchard_recorder_write_duration_seconds, orchard_recorder_queue_length,
// orchard_recorder_queue_bytes and orchard_recorder_spill_pending_bytes.
func (p *Pipeline) Collectors() []prometheus.Collector { return p.m.collectors }

// Record hands c to the pipeline. It never blocks on storage and never
// drops c: if the queue is full, or the pipeline has stopped, c is appended
// to the spill file at once. The pipeline keeps c: the caller must not
// modify it (or anything it points to) afterwards. A call without a CallID
// is given a random one.
func (p *Pipeline) Record(c *Call) {
	if c.CallID == "" {
		c.CallID = randomCallID()
	}
	prepare(c) // here, in parallel, rather than on the single writer
	if p.enqueue(c) {
		p.m.queued.Inc()
		return
	}
	if err := p.spill.append([]*Call{c}); err != nil {
		p.log.Error("spill call; holding it in memory", "call", c.CallID, "err", err)
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// enqueue puts c on the queue if the pipeline is running and the queue
// has room for it, in calls and in bytes.
func (p *Pipeline) enqueue(c *Call) bool {
	c.held = c.heldBytes()
	if n := p.queued.Add(c.held); n > int64(p.opts.QueueBytes) && n > c.held {
		p.queued.Add(-c.held)
		return false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.stopped {
		select {
		case p.queue <- c:
			return true
		default:
		}
	}
	p.queued.Add(-c.held)
	return false
}

// dequeue takes c, received from the queue, off the queue's byte count.
func (p *Pipeline) dequeue(c *Call) *Call {
	p.queued.Add(-c.held)
	return c
}

func randomCallID() string {
	var b [12]byte
	rand.Read(b[:]) // never fails (crypto/rand documents it)
	return "call_" + hex.EncodeToString(b[:])
}

// Start replays a leftover spill file, then writes queued calls until ctx
// is done. It then drains: queued calls go to the store, or to the spill
// file if the store is failing, and the spill file is synced, before Start
// returns nil. It returns an error only if the spill file cannot be opened
// or Start was already called.
func (p *Pipeline) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return errors.New("pipeline already started")
	}
	p.started = true
	p.mu.Unlock()
	if err := p.spill.open(); err != nil {
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		p.drainQueueToSpill()
		return errors.Join(err, p.lost())
	}
	l := newWriterLoop(p)
	l.run(ctx)
	return errors.Join(l.drain(), p.lost())
}

// Open locks the spill directory and opens the spill file, so that a
// second process on the same directory fails (with [ErrSpillLocked])
// before it serves anything. Start opens it if Open was not called.
func (p *Pipeline) Open() error { return p.spill.open() }

// ErrDropped is wrapped by the error of [Pipeline.Start] when calls were
// lost: neither the store nor the spill file would take them and the
// in-memory backlog was full, or the process stopped while they waited.
var ErrDropped = errors.New("calls dropped")

// Dropped returns how many calls were lost so far (see [ErrDropped]).
func (p *Pipeline) Dropped() int64 { return p.drops.Load() }

func (p *Pipeline) dropped(n int, why error) {
	p.drops.Add(int64(n))
	p.m.dropped.Add(float64(n))
	p.log.Error("calls dropped: neither the store nor the spill file takes them and the in-memory backlog is full",
		"calls", n, "dropped_total", p.drops.Load(), "max_backlog_bytes", p.opts.MaxBacklogBytes, "err", why)
}

func (p *Pipeline) lost() error {
	if n := p.drops.Load(); n > 0 {
		return fmt.Errorf("%d calls were not recorded: %w", n, ErrDropped)
	}
	return nil
}

func (p *Pipeline) drainQueueToSpill() {
	var calls []*Call
	for {
		select {
		case c := <-p.queue:
			calls = append(calls, p.dequeue(c))
		default:
			if err := p.spill.append(calls); err != nil {
				p.log.Error("spill calls at shutdown", "calls", len(calls), "err", err)
			}
			p.spill.close() // drops (counting) what the disk would not take
			return
		}
	}
}
