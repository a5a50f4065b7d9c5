package loadgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// ReportSchema versions the results JSON.
const ReportSchema = "orchard.bench/v1"

// Report is one suite run: the machine, the settings, a cell per target and
// load, the ratios against the bare proxy and the targets' checks.
type Report struct {
	Schema    string       `json:"schema"`
	StartedAt time.Time    `json:"started_at"`
	Seconds   float64      `json:"seconds"`
	Machine   Machine      `json:"machine"`
	Settings  Settings     `json:"settings"`
	Targets   []TargetInfo `json:"targets"`
	Cells     []Cell       `json:"cells"`
	Ratios    []Ratio      `json:"ratios"`
	Checks    []Check      `json:"checks"`
	Notes     []string     `json:"notes,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPU       string  `json:"cpu"`
	Cores     int     `json:"cores"`
	MemoryGB  float64 `json:"memory_gb"`
	Kernel    string  `json:"kernel"`
	Go        string  `json:"go"`
	Commit    string  `json:"commit,omitempty"`
	LoadStart float64 `json:"load_avg_start"`
	LoadEnd   float64 `json:"load_avg_end"`
}

// Settings are the run's parameters.
type Settings struct {
	Scenario      Scenario `json:"scenario"`
	Concurrency   []int    `json:"concurrency"`
	WarmupS       float64  `json:"warmup_s"`
	DurationS     float64  `json:"duration_s"`
	Rounds        int      `json:"rounds"`
	OpenRate      float64  `json:"open_rate,omitempty"`
	OpenDurationS float64  `json:"open_duration_s,omitempty"`
}

// TargetInfo names a target and says whether it ran.
type TargetInfo struct {
	Key     string `json:"key"`
	Name    string `json:"name"`
	Desc    string `json:"desc"`
	Skipped string `json:"skipped,omitempty"`
}

// Cell is one target under one load.
type Cell struct {
	Target      string  `json:"target"`
	Key         string  `json:"key"`
	Mode        string  `json:"mode"` // closed or open
	Concurrency int     `json:"concurrency,omitempty"`
	Rate        float64 `json:"rate,omitempty"`
	Summary
	// AddedP50/P99 are this target's total latency percentiles minus the
	// upstream's (a) under the same load, in ms.
	AddedP50     float64 `json:"added_total_p50_ms"`
	AddedP99     float64 `json:"added_total_p99_ms"`
	AddedTTFBP50 float64 `json:"added_ttfb_p50_ms"`
	// CPU seconds per 1000 samples: the proxy process (0 for a), the
	// upstream, Redis and the load generator.
	ProxyCPU  float64 `json:"proxy_cpu_s_per_1k"`
	UpCPU     float64 `json:"upstream_cpu_s_per_1k"`
	RedisCPU  float64 `json:"redis_cpu_s_per_1k,omitempty"`
	ClientCPU float64 `json:"client_cpu_s_per_1k"`
	PeakRSSMB float64 `json:"proxy_peak_rss_mb"` // VmHWM of the proxy process
	// Sent and Recorded count the requests a recording proxy was sent and
	// the calls it stored (Recorded -1: could not be read).
	Sent     int `json:"sent,omitempty"`
	Recorded int `json:"recorded,omitempty"`
	// Spilled counts the recorded calls that were still in the spill file
	// when the proxy exited and reached the store on its restart.
	Spilled   int      `json:"spilled_at_exit,omitempty"`
	LoadStart float64  `json:"load_avg_start"`
	LoadEnd   float64  `json:"load_avg_end"`
	Notes     []string `json:"notes,omitempty"`
}

// Ratio compares a recording proxy with the bare proxy (b) under one load.
type Ratio struct {
	Target      string  `json:"target"`
	Concurrency int     `json:"concurrency"`
	Throughput  float64 `json:"throughput_ratio"`   // target / bare
	CPU         float64 `json:"cpu_per_req_ratio"`  // target / bare, proxy process
	P50Delta    float64 `json:"total_p50_delta_ms"` // target - bare
	P99Delta    float64 `json:"total_p99_delta_ms"` // target - bare
}

// Check is one of the benchmark's targets for one recording proxy.
type Check struct {
	Target string `json:"target"`
	Name   string `json:"name"`
	Got    string `json:"got"`
	Pass   bool   `json:"pass"`
}

// report builds the Report from the cells.
func (s *suite) report(started time.Time, loadStart float64) *Report {
	r := &Report{
		Schema: ReportSchema, StartedAt: started.UTC(), Seconds: round(time.Since(started).Seconds(), 1),
		Machine: machine(loadStart),
		Settings: Settings{Scenario: s.cfg.Scenario, Concurrency: s.cfg.Concurrency,
			WarmupS: s.cfg.Warmup.Seconds(), DurationS: s.cfg.Duration.Seconds(), Rounds: s.cfg.Rounds},
	}
	if s.cfg.OpenRate > 0 {
		r.Settings.OpenRate, r.Settings.OpenDurationS = s.cfg.OpenRate, s.cfg.OpenDuration.Seconds()
	}
	for _, t := range s.targets {
		r.Targets = append(r.Targets, TargetInfo{Key: t.Key, Name: t.Name, Desc: t.Desc, Skipped: s.skipped[t.Key]})
		if why := s.skipped[t.Key]; why != "" {
			r.Notes = append(r.Notes, fmt.Sprintf("(%s) %s skipped: %s", t.Key, t.Name, why))
		}
	}
	for _, k := range s.order {
		if s.skipped[k.target] != "" {
			continue
		}
		r.Cells = append(r.Cells, s.cells[k].cell(k))
	}
	r.compare()
	return r
}

// cell reduces a cellRun.
func (cr *cellRun) cell(k cellKey) Cell {
	t, _ := targetByKey(k.target)
	c := Cell{Target: t.Name, Key: t.Key, Mode: k.mode, Concurrency: k.conc, Rate: k.rate,
		Summary: cr.m.Summarize(), Notes: cr.notes}
	per1k := func(d time.Duration) float64 {
		if c.Requests == 0 {
			return 0
		}
		return round(d.Seconds()*1000/float64(c.Requests), 3)
	}
	c.ProxyCPU, c.UpCPU, c.RedisCPU, c.ClientCPU = per1k(cr.proxyCPU), per1k(cr.upCPU), per1k(cr.redisCPU), per1k(cr.clientCPU)
	c.PeakRSSMB = round(float64(cr.peakRSS)/(1<<20), 1)
	c.Sent, c.Recorded, c.Spilled = cr.sent, cr.recorded, cr.spilled
	if cr.rounds > 0 {
		c.LoadStart = round(cr.loadStart/float64(cr.rounds), 2)
		c.LoadEnd = round(cr.loadEnd/float64(cr.rounds), 2)
	}
	return c
}

// compare fills the added latencies, the ratios and the checks.
func (r *Report) compare() {
	find := func(key, mode string, conc int) *Cell {
		for i := range r.Cells {
			c := &r.Cells[i]
			if c.Key == key && c.Mode == mode && c.Concurrency == conc {
				return c
			}
		}
		return nil
	}
	for i := range r.Cells {
		c := &r.Cells[i]
		if a := find("a", c.Mode, c.Concurrency); a != nil {
			c.AddedP50 = round(c.Total.P50-a.Total.P50, 3)
			c.AddedP99 = round(c.Total.P99-a.Total.P99, 3)
			c.AddedTTFBP50 = round(c.TTFB.P50-a.TTFB.P50, 3)
		}
		b := find("b", c.Mode, c.Concurrency)
		if b == nil || c.Key == "a" || c.Key == "b" || c.Mode != "closed" {
			continue
		}
		ratio := Ratio{Target: c.Target, Concurrency: c.Concurrency,
			P50Delta: round(c.Total.P50-b.Total.P50, 3), P99Delta: round(c.Total.P99-b.Total.P99, 3)}
		if b.Throughput > 0 {
			ratio.Throughput = round(c.Throughput/b.Throughput, 3)
		}
		if b.ProxyCPU > 0 {
			ratio.CPU = round(c.ProxyCPU/b.ProxyCPU, 3)
		}
		r.Ratios = append(r.Ratios, ratio)
	}
	r.check()
}

// check evaluates the benchmark's targets for every recording proxy that ran.
func (r *Report) check() {
	for _, t := range r.Targets {
		if t.Skipped != "" {
			continue
		}
		errs, trunc, sent, recorded, spilled := 0, 0, 0, 0, 0
		for _, c := range r.Cells {
			if c.Key == t.Key {
				errs += c.Errors
				trunc += c.Truncated
				sent += c.Sent
				spilled += c.Spilled
				if recorded >= 0 && c.Recorded >= 0 {
					recorded += c.Recorded
				} else {
					recorded = -1
				}
			}
		}
		r.Checks = append(r.Checks, Check{Target: t.Name, Name: "zero errors and truncated streams",
			Got: fmt.Sprintf("%d errors (%d truncated)", errs, trunc), Pass: errs == 0})
		if sent > 0 {
			r.Checks = append(r.Checks, Check{Target: t.Name, Name: "every call recorded",
				Got: fmt.Sprintf("%d of %d (%d via spill replay on restart)", recorded, sent, spilled), Pass: recorded == sent})
		}
		if t.Key == "a" || t.Key == "b" {
			continue
		}
		for _, ra := range r.Ratios {
			if ra.Target != t.Name {
				continue
			}
			switch ra.Concurrency {
			case 1:
				r.add(t.Name, "1 client: total p50 within +0.15 ms of bare", ra.P50Delta, "%+.3f ms", ra.P50Delta <= 0.15)
				r.add(t.Name, "1 client: total p99 within +1 ms of bare", ra.P99Delta, "%+.3f ms", ra.P99Delta <= 1)
			case 8, 64:
				r.add(t.Name, fmt.Sprintf("%d clients: throughput >= 0.9x bare", ra.Concurrency), ra.Throughput, "%.3fx", ra.Throughput >= 0.9)
				r.add(t.Name, fmt.Sprintf("%d clients: CPU per request <= 1.3x bare", ra.Concurrency), ra.CPU, "%.3fx", ra.CPU > 0 && ra.CPU <= 1.3)
			}
		}
		for _, c := range r.Cells {
			if c.Key == t.Key && c.Mode == "closed" && c.Concurrency == 256 {
				r.add(t.Name, "256 streams: peak RSS <= 64 MB", c.PeakRSSMB, "%.1f MB", c.PeakRSSMB <= 64)
			}
		}
	}
}

func (r *Report) add(target, name string, v float64, format string, pass bool) {
	r.Checks = append(r.Checks, Check{Target: target, Name: name, Got: fmt.Sprintf(format, v), Pass: pass})
}

// Failed reports whether any stream failed (an error or a truncated stream
// in any cell) or a recording proxy lost a call.
func (r *Report) Failed() bool {
	for _, c := range r.Cells {
		if c.Errors > 0 || c.Recorded != c.Sent {
			return true
		}
	}
	return false
}

// machine describes this machine.
func machine(loadStart float64) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), LoadStart: loadStart, LoadEnd: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemoryGB = round(float64(statusKB(b, "MemTotal:"))/(1<<30), 1)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				m.Commit = s.Value + m.Commit
			case "vcs.modified":
				if s.Value == "true" {
					m.Commit += "+dirty"
				}
			}
		}
	}
	if m.Commit == "" {
		m.Commit = gitHead(".")
	}
	return m
}

// gitHead reads the commit checked out in dir's .git, without running git
// (builds with -buildvcs=false carry no revision); "" if unknown.
func gitHead(dir string) string {
	head, err := os.ReadFile(filepath.Join(dir, ".git", "HEAD"))
	if err != nil {
		return ""
	}
	ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
	if !ok {
		return strings.TrimSpace(string(head))
	}
	if b, err := os.ReadFile(filepath.Join(dir, ".git", ref)); err == nil {
		return strings.TrimSpace(string(b))
	}
	packed, err := os.ReadFile(filepath.Join(dir, ".git", "packed-refs"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(packed), "\n") {
		if sha, name, ok := strings.Cut(line, " "); ok && name == ref {
			return sha
		}
	}
	return ""
}

// WriteJSON writes the report as dir/<UTC start time>.json and returns the
// path.
func (r *Report) WriteJSON(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("make results dir: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode results: %w", err)
	}
	path := filepath.Join(dir, r.StartedAt.Format("2006-01-02T150405Z")+".json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("write results: %w", err)
	}
	return path, nil
}

// WriteTable prints the report for people: a block per load, then the
// ratios and the checks.
func (r *Report) WriteTable(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "orchard-bench  %s  %s, %d cores, load avg %.1f -> %.1f, %s, commit %s\n",
		r.StartedAt.Format(time.RFC3339), r.Machine.CPU, r.Machine.Cores, r.Machine.LoadStart, r.Machine.LoadEnd,
		r.Machine.Go, short(r.Machine.Commit))
	sc := r.Settings.Scenario
	fmt.Fprintf(&b, "scenario: %d turns/episode, prompts %d..~%d B, %d..%d chunks of %d B text, first byte %v, chunk delay %v; %gs warmup + %gs per cell, %d round(s)\n",
		sc.Turns, sc.PromptMin, sc.PromptMax, sc.ChunksMin, sc.ChunksMax, sc.ChunkBytes, sc.FirstByteDelay, sc.ChunkDelay,
		r.Settings.WarmupS, r.Settings.DurationS, r.Settings.Rounds)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	var last string
	for _, c := range r.Cells {
		head := fmt.Sprintf("%s c=%d", c.Mode, c.Concurrency)
		if c.Mode == "open" {
			head = fmt.Sprintf("open loop %.0f req/s", c.Rate)
		}
		if head != last {
			fmt.Fprintf(&b, "\n%s (load avg %.1f)\n", head, c.LoadStart)
			fmt.Fprintf(&b, "  %-20s %6s %4s %5s %7s  %-27s  %-27s %7s %7s %7s %7s %6s\n", "target", "ok", "err", "trunc", "req/s",
				"ttfb p50/p90/p99/max ms", "total p50/p90/p99/max ms", "+p50", "+p99", "cpu/1k", "up/1k", "rssMB")
			last = head
		}
		writeCell(&b, c)
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintf(&b, "\nvs bare proxy (b)      %4s %10s %10s %12s %12s\n", "c", "thr ratio", "cpu ratio", "p50 delta ms", "p99 delta ms")
		for _, ra := range r.Ratios {
			fmt.Fprintf(&b, "  %-20s %4d %10.3f %10.3f %12.3f %12.3f\n", ra.Target, ra.Concurrency, ra.Throughput, ra.CPU, ra.P50Delta, ra.P99Delta)
		}
	}
	fmt.Fprintf(&b, "\ntargets\n")
	for _, c := range r.Checks {
		verdict := "FAIL"
		if c.Pass {
			verdict = "pass"
		}
		fmt.Fprintf(&b, "  %-4s %-20s %-44s %s\n", verdict, c.Target, c.Name, c.Got)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// writeCell prints one row of the table and its notes.
func writeCell(b *bytes.Buffer, c Cell) {
	proxyCPU, rss := fmt.Sprintf("%.3f", c.ProxyCPU), fmt.Sprintf("%.1f", c.PeakRSSMB)
	if c.Key == "a" {
		proxyCPU, rss = "-", "-"
	}
	fmt.Fprintf(b, "  %-20s %6d %4d %5d %7.1f  %-27s  %-27s %7.2f %7.2f %7s %7.3f %6s\n",
		c.Key+" "+c.Target, c.Requests, c.Errors, c.Truncated, c.Throughput, dist(c.TTFB), dist(c.Total),
		c.AddedP50, c.AddedP99, proxyCPU, c.UpCPU, rss)
	for _, e := range c.ErrorLog {
		fmt.Fprintf(b, "      error: %s\n", e)
	}
	for _, n := range c.Notes {
		fmt.Fprintf(b, "      note: %s\n", n)
	}
	if c.Recorded != c.Sent || c.Spilled > 0 {
		fmt.Fprintf(b, "      records: %d stored of %d sent; %d of them were left in the spill file at exit and stored on restart\n",
			c.Recorded, c.Sent, c.Spilled)
	}
}

func dist(d Dist) string {
	return fmt.Sprintf("%.2f/%.2f/%.2f/%.1f", d.P50, d.P90, d.P99, d.Max)
}

func short(commit string) string {
	if len(commit) > 12 && !strings.HasSuffix(commit, "+dirty") {
		return commit[:12]
	}
	if i := strings.Index(commit, "+"); i > 12 {
		return commit[:12] + commit[i:]
	}
	return commit
}
