package loadgen

import (
	"fmt"
	"slices"
	"strings"
)

// Floors: the bare proxy, and the bare proxy whose client asks for token
// ids and logprobs itself (the bytes of orchard's token path, upstream
// side).
const (
	floorBare = "b"
	floorIDs  = "b+ids"
)

// find returns the cell of target key under one load, or nil.
func (r *Report) find(key, mode string, conc int) *Cell {
	for i := range r.Cells {
		c := &r.Cells[i]
		if c.Key == key && c.Mode == mode && c.Concurrency == conc {
			return c
		}
	}
	return nil
}

// info returns the target with key k.
func (r *Report) info(k string) TargetInfo {
	for _, t := range r.Targets {
		if t.Key == k {
			return t
		}
	}
	return TargetInfo{Key: k}
}

// compare fills the added latencies, the ratios and the checks.
func (r *Report) compare() {
	for i := range r.Cells {
		c := &r.Cells[i]
		if a := r.find("a", c.Mode, c.Concurrency); a != nil {
			c.AddedP50 = round(c.Total.P50-a.Total.P50, 3)
			c.AddedP99 = round(c.Total.P99-a.Total.P99, 3)
			c.AddedTTFBP50 = round(c.TTFB.P50-a.TTFB.P50, 3)
		}
		if c.Mode != "closed" || r.info(c.Key).Path == "" {
			continue
		}
		for _, base := range r.bases(r.info(c.Key)) {
			if b := r.find(base, c.Mode, c.Concurrency); b != nil {
				r.Ratios = append(r.Ratios, ratio(c, b))
			}
		}
	}
	r.check()
}

// bases are what an orchard target is compared with: the bare proxy; for
// the token path also b+ids; for a target with a baseline twin, the twin.
func (r *Report) bases(t TargetInfo) []string {
	out := []string{floorBare}
	if t.Path == "token" {
		out = append(out, floorIDs)
	}
	if twin := t.Key + "'"; t.BaselineOf == "" && r.info(twin).BaselineOf == t.Key {
		out = append(out, twin)
	}
	return out
}

// ratio compares cell c with base cell b (same load).
func ratio(c, b *Cell) Ratio {
	r := Ratio{Target: c.Target, Key: c.Key, Base: b.Key, Concurrency: c.Concurrency,
		Throughput: div(c.Throughput, b.Throughput), CPU: div(c.ProxyCPU, b.ProxyCPU),
		RSS:      div(c.PeakRSSMB, b.PeakRSSMB),
		P50Delta: round(c.Total.P50-b.Total.P50, 3), P99Delta: round(c.Total.P99-b.Total.P99, 3)}
	if len(c.Rounds) > 1 && len(c.Rounds) == len(b.Rounds) {
		for i, cr := range c.Rounds {
			br := b.Rounds[i]
			r.ThroughputRounds = append(r.ThroughputRounds, div(cr.Throughput, br.Throughput))
			r.CPURounds = append(r.CPURounds, div(cr.ProxyCPU, br.ProxyCPU))
			if cr.PeakRSSMB > 0 && br.PeakRSSMB > 0 {
				r.RSSRounds = append(r.RSSRounds, div(cr.PeakRSSMB, br.PeakRSSMB))
			}
		}
	}
	return r
}

// spread formats the smallest and largest of per-round ratios, or "-".
func spread(rs []float64) string {
	if len(rs) == 0 {
		return "-"
	}
	lo, hi := slices.Min(rs), slices.Max(rs)
	return fmt.Sprintf("%.3f-%.3f", lo, hi)
}

// div is a/b rounded, 0 when b is not positive.
func div(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return round(a/b, 3)
}

// limits are a path's targets against its floor.
type limits struct {
	floor  string
	cpu    float64 // CPU per request, at most this times the floor's (8 and 64 clients)
	rssMB  float64 // peak RSS at 256 streams, absolute (0: none)
	rssX   float64 // peak RSS at 256 streams, at most this times the floor's (0: none)
	p50Add float64 // 1 client: total p50, ms over the floor's
}

// limitsFor returns t's targets: the token path against b+ids when it ran,
// every other orchard target (and the token path without b+ids) against
// the bare proxy.
func (r *Report) limitsFor(t TargetInfo) limits {
	if t.Path == "token" && r.ran(floorIDs) {
		return limits{floor: floorIDs, cpu: 1.5, rssX: 2, p50Add: 0.15}
	}
	return limits{floor: floorBare, cpu: 1.3, rssMB: 64, p50Add: 0.15}
}

// ran reports whether target key has any cell.
func (r *Report) ran(key string) bool {
	for _, c := range r.Cells {
		if c.Key == key {
			return true
		}
	}
	return false
}

// check evaluates the benchmark's targets: no failed stream and no lost
// call for every target; the throughput, CPU, latency and memory targets
// for every orchard target under test (not for a baseline twin); and,
// where the floors ran more than one round, whether the host was steady.
func (r *Report) check() {
	for _, t := range r.Targets {
		if t.Skipped != "" {
			continue
		}
		r.checkStreams(t)
		if t.Path != "" && t.BaselineOf == "" {
			r.checkCost(t, r.limitsFor(t))
		}
	}
	for _, f := range []string{floorBare, floorIDs} {
		r.checkSteady(r.info(f))
	}
}

// steadySpread is how far apart a floor's rounds may be, in throughput at
// one load, for the run's ratios to measure the proxy rather than the
// host: the floor's work does not change between rounds, so what moves it
// moved the targets around it too, and a ratio that much from its goal
// may pass or fail by chance.
const steadySpread = 0.10

// checkSteady reports the widest spread of floor t's rounds at one load:
// (fastest - slowest) / fastest, throughput.
func (r *Report) checkSteady(t TargetInfo) {
	worst, at := -1.0, 0
	for _, c := range r.Cells {
		if c.Key != t.Key || c.Mode != "closed" || len(c.Rounds) < 2 {
			continue
		}
		lo, hi := c.Rounds[0].Throughput, c.Rounds[0].Throughput
		for _, rd := range c.Rounds[1:] {
			lo, hi = min(lo, rd.Throughput), max(hi, rd.Throughput)
		}
		if hi > 0 && (hi-lo)/hi > worst {
			worst, at = (hi-lo)/hi, c.Concurrency
		}
	}
	if at == 0 {
		return
	}
	r.Checks = append(r.Checks, Check{Target: t.Name,
		Name: fmt.Sprintf("steady host: rounds within %.0f%% at each load", steadySpread*100),
		Got:  fmt.Sprintf("%.1f%% apart at %d clients", 100*worst, at), Pass: worst <= steadySpread})
}

// checkStreams sums t's errors and records over its cells.
func (r *Report) checkStreams(t TargetInfo) {
	errs, trunc, sent, recorded, spilled := 0, 0, 0, 0, 0
	for _, c := range r.Cells {
		if c.Key != t.Key {
			continue
		}
		errs, trunc, sent, spilled = errs+c.Errors, trunc+c.Truncated, sent+c.Sent, spilled+c.Spilled
		if recorded >= 0 && c.Recorded >= 0 {
			recorded += c.Recorded
		} else {
			recorded = -1
		}
	}
	r.Checks = append(r.Checks, Check{Target: t.Name, Name: "zero errors and truncated streams",
		Got: fmt.Sprintf("%d errors (%d truncated)", errs, trunc), Pass: errs == 0})
	if sent > 0 {
		r.Checks = append(r.Checks, Check{Target: t.Name, Name: "every call recorded",
			Got: fmt.Sprintf("%d of %d (%d via spill replay on restart)", recorded, sent, spilled), Pass: recorded == sent})
	}
}

// checkCost checks t's ratios against its floor, and its peak RSS at 256
// streams.
func (r *Report) checkCost(t TargetInfo, l limits) {
	f := l.floor
	for _, ra := range r.Ratios {
		if ra.Key != t.Key || ra.Base != f {
			continue
		}
		switch ra.Concurrency {
		case 1:
			r.add(t.Name, fmt.Sprintf("1 client: total p50 within +%g ms of %s", l.p50Add, f), ra.P50Delta, "%+.3f ms", ra.P50Delta <= l.p50Add)
			r.add(t.Name, "1 client: total p99 within +1 ms of "+f, ra.P99Delta, "%+.3f ms", ra.P99Delta <= 1)
		case 8, 64:
			r.add(t.Name, fmt.Sprintf("%d clients: throughput >= 0.9x %s", ra.Concurrency, f), ra.Throughput, "%.3fx", ra.Throughput >= 0.9)
			r.add(t.Name, fmt.Sprintf("%d clients: CPU per request <= %gx %s", ra.Concurrency, l.cpu, f), ra.CPU, "%.3fx", ra.CPU > 0 && ra.CPU <= l.cpu)
		case 256:
			if l.rssX > 0 {
				r.add(t.Name, fmt.Sprintf("256 streams: peak RSS <= %gx %s", l.rssX, f), ra.RSS, "%.2fx", ra.RSS > 0 && ra.RSS <= l.rssX)
			}
		}
	}
	if c := r.find(t.Key, "closed", 256); c != nil && l.rssMB > 0 {
		r.add(t.Name, fmt.Sprintf("256 streams: peak RSS <= %g MB", l.rssMB), c.PeakRSSMB, "%.1f MB", c.PeakRSSMB <= l.rssMB)
	}
}

func (r *Report) add(target, name string, v float64, format string, pass bool) {
	r.Checks = append(r.Checks, Check{Target: target, Name: name, Got: fmt.Sprintf(format, v), Pass: pass})
}

// baseBlock is the table's block of ratios against base: its rank (b,
// then b+ids, then the baseline twins) and title.
func baseBlock(base string) (int, string) {
	switch {
	case base == floorBare:
		return 0, "vs b (bare proxy)"
	case base == floorIDs:
		return 1, "vs b+ids (bare proxy, the client asks for token ids and logprobs)"
	case strings.HasSuffix(base, "'"):
		return 2, "vs the baseline binary (x')"
	}
	return 3, "vs " + base
}
