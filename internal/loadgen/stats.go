package loadgen

import (
	"math"
	"slices"
	"time"
)

// Dist summarises a latency distribution, in milliseconds.
type Dist struct {
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted: the smallest value with at least p% of the values at or below it.
// It returns 0 for an empty slice.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// distOf summarises ds; it sorts ds in place.
func distOf(ds []time.Duration) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Dist{
		P50:  ms(Percentile(ds, 50)),
		P90:  ms(Percentile(ds, 90)),
		P99:  ms(Percentile(ds, 99)),
		Max:  ms(ds[len(ds)-1]),
		Mean: ms(sum / time.Duration(len(ds))),
	}
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// Summary is a [Measurement] reduced to the reported figures.
type Summary struct {
	Requests   int            `json:"requests"`  // samples: OK requests that ended in the window
	Errors     int            `json:"errors"`    // every non-OK request of the run
	Truncated  int            `json:"truncated"` // of which streams without their terminal event
	Outcomes   map[string]int `json:"outcomes"`  // every request of the run by outcome
	WindowS    float64        `json:"window_s"`  // measured window
	Throughput float64        `json:"req_per_s"` // samples per second of window
	MBps       float64        `json:"mb_per_s"`  // body bytes of the samples per second
	TTFB       Dist           `json:"ttfb"`      // to the first body byte (first token event)
	Total      Dist           `json:"total"`     // to the end of the stream
	ErrorLog   []string       `json:"error_log,omitempty"`
}

// Summarize reduces m.
func (m *Measurement) Summarize() Summary {
	s := Summary{Requests: len(m.Samples), WindowS: m.Window.Seconds(), Outcomes: map[string]int{}, ErrorLog: m.Errors}
	for o, n := range m.Outcomes {
		if n > 0 {
			s.Outcomes[Outcome(o).String()] = n
		}
		if Outcome(o) != OK {
			s.Errors += n
		}
	}
	s.Truncated = m.Outcomes[Truncated]
	ttfb := make([]time.Duration, len(m.Samples))
	total := make([]time.Duration, len(m.Samples))
	bytes := 0
	for i, r := range m.Samples {
		ttfb[i], total[i] = r.TTFB, r.Total
		bytes += r.Bytes
	}
	if s.WindowS > 0 {
		s.Throughput = round(float64(s.Requests)/s.WindowS, 1)
		s.MBps = round(float64(bytes)/1e6/s.WindowS, 2)
	}
	s.TTFB, s.Total = distOf(ttfb), distOf(total)
	return s
}

// round rounds x to d decimals.
func round(x float64, d int) float64 {
	p := math.Pow(10, float64(d))
	return math.Round(x*p) / p
}
