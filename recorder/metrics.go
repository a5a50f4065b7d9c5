package recorder

import "github.com/prometheus/client_golang/prometheus"

// pipelineMetrics are the pipeline's counters. They are plain collectors,
// registered by whoever owns the registry (no global registry here).
type pipelineMetrics struct {
	queued, written, spilled, replayed prometheus.Counter
	dropped                            prometheus.Counter
	latency                            prometheus.Histogram
	collectors                         []prometheus.Collector
}

func newPipelineMetrics(p *Pipeline) *pipelineMetrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "orchard", Subsystem: "recorder", Name: name, Help: help})
	}
	m := &pipelineMetrics{
		queued:   counter("queued_total", "Calls accepted into the in-memory queue."),
		written:  counter("written_total", "Calls written to the store from the queue."),
		spilled:  counter("spilled_total", "Calls appended to the local spill file."),
		replayed: counter("replayed_total", "Calls written to the store from the spill file."),
		dropped:  counter("dropped_total", "Calls lost: neither the store nor the spill file took them and the in-memory backlog was full."),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "orchard", Subsystem: "recorder", Name: "write_duration_seconds",
			Help:    "Duration of store writes (one batch each), failed ones included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
	}
	queueLen := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "orchard", Subsystem: "recorder", Name: "queue_length", Help: "Calls waiting in the in-memory queue.",
	}, func() float64 { return float64(len(p.queue)) })
	queueBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "orchard", Subsystem: "recorder", Name: "queue_bytes", Help: "Estimated memory held by the calls in the in-memory queue.",
	}, func() float64 { return float64(p.queued.Load()) })
	spillBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "orchard", Subsystem: "recorder", Name: "spill_pending_bytes", Help: "Bytes of the spill file not yet replayed.",
	}, func() float64 {
		p.spill.mu.Lock()
		defer p.spill.mu.Unlock()
		return float64(p.spill.end - p.spill.off)
	})
	backlog := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "orchard", Subsystem: "recorder", Name: "spill_backlog_bytes",
		Help: "Bytes of calls held in memory because the spill file cannot be written (a full disk).",
	}, func() float64 { n, _ := p.spill.backlogSize(); return float64(n) })
	m.collectors = []prometheus.Collector{m.queued, m.written, m.spilled, m.replayed, m.dropped, m.latency, queueLen, queueBytes, spillBytes, backlog}
	if d, ok := p.store.(dedupStatser); ok {
		m.collectors = append(m.collectors, dedupCollectors(d)...)
	}
	return m
}

// dedupStatser is a store that reports its dedup state (both stores do).
type dedupStatser interface{ DedupStats() DedupStats }

func dedupCollectors(d dedupStatser) []prometheus.Collector {
	opts := func(name, help string) prometheus.GaugeOpts {
		return prometheus.GaugeOpts{Namespace: "orchard", Subsystem: "recorder", Name: name, Help: help}
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(opts("dedup_episodes", "Episodes whose dedup state (encoder) the store keeps in memory."),
			func() float64 { return float64(d.DedupStats().Episodes) }),
		prometheus.NewGaugeFunc(opts("dedup_bytes", "Estimated memory of the store's dedup state, which its byte bound caps."),
			func() float64 { return float64(d.DedupStats().Bytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("dedup_evictions_total",
			"Dedup states let go by the store's bounds rather than by their episode finishing; each is rebuilt from the stored calls if the episode goes on.")),
			func() float64 { return float64(d.DedupStats().Evictions) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("dedup_rebuilds_total",
			"Dedup states rebuilt by reading back an episode's stored calls: after a restart, after another replica wrote the episode, or after the bounds let an episode go while it ran.")),
			func() float64 { return float64(d.DedupStats().Rebuilds) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("dedup_compactions_total",
			"Dedup states cut down to their episode's latest call because the episode went the store's episode bound's worth of writes without a call.")),
			func() float64 { return float64(d.DedupStats().Compactions) }),
	}
}
