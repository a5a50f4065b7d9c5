package proxy

import (
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orchard-rl/orchard/recorder"
)

// metrics are the proxy's Prometheus collectors. Labels are a few fixed
// values (api, status code, end reason); never an episode, a model or a key.
type metrics struct {
	requests *prometheus.CounterVec
	ends     *prometheus.CounterVec
	duration *prometheus.HistogramVec
	ttfb     *prometheus.HistogramVec
	lineage  *prometheus.CounterVec
	kinds    *prometheus.GaugeVec
	harness  harnessNames
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orchard_proxy_requests_total", Help: "Recorded model calls by API and upstream HTTP status.",
		}, []string{"api", "status"}),
		ends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orchard_proxy_call_end_total", Help: "Recorded model calls by API and how they ended.",
		}, []string{"api", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "orchard_proxy_call_duration_seconds", Help: "Time from request to the end of the response.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"api"}),
		ttfb: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "orchard_proxy_time_to_first_byte_seconds", Help: "Time from request to the first response byte.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"api"}),
	}
	m.lineage = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orchard_proxy_lineage_total",
		Help: "Recorded calls by how they relate to earlier calls of their episode (drift class) and harness; counted only with --live-lineage.",
	}, []string{"kind", "harness"})
	m.kinds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "orchard_upstream_kind",
		Help: "1 for the kind each upstream is treated as: configured, detected, or unknown (openai-compatible).",
	}, []string{"upstream", "kind"})
	m.harness.seen = make(map[string]struct{})
	reg.MustRegister(m.requests, m.ends, m.duration, m.ttfb, m.lineage, m.kinds)
	return m
}

func (m *metrics) observe(c *recorder.Call) {
	if m == nil {
		return
	}
	api := string(c.API)
	m.requests.WithLabelValues(api, strconv.Itoa(c.Status)).Inc()
	m.ends.WithLabelValues(api, string(c.EndReason)).Inc()
	m.duration.WithLabelValues(api).Observe(c.EndedAt.Sub(c.StartedAt).Seconds())
	if c.FirstByteAt != nil {
		m.ttfb.WithLabelValues(api).Observe(c.FirstByteAt.Sub(c.StartedAt).Seconds())
	}
	if c.Lineage != nil {
		m.lineage.WithLabelValues(string(c.Lineage.Kind), m.harness.name(c.Harness)).Inc()
	}
}

// setKind moves upstream's kind gauge from old ("" for none) to kind.
func (m *metrics) setKind(upstream string, old, kind UpstreamKind) {
	if m == nil {
		return
	}
	if old != "" && old != kind {
		m.kinds.DeleteLabelValues(upstream, string(old))
	}
	m.kinds.WithLabelValues(upstream, string(kind)).Set(1)
}

// harnessNames turns User-Agents into a bounded set of label values: the
// product name ("codex_exec/0.171.0 (...)" is "codex_exec"), and "other"
// once maxHarnesses names have been seen.
type harnessNames struct {
	mu   sync.Mutex // guards following
	seen map[string]struct{}
}

const maxHarnesses = 32

func (h *harnessNames) name(ua string) string {
	name, _, _ := strings.Cut(ua, "/")
	name, _, _ = strings.Cut(name, " ")
	if name == "" {
		return "unknown"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.seen[name]; !ok {
		if len(h.seen) >= maxHarnesses {
			return "other"
		}
		h.seen[name] = struct{}{}
	}
	return name
}
