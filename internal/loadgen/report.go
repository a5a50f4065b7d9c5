package loadgen

import (
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// ReportSchema versions the results JSON. v2: ratios carry their base (b,
// b+ids or a baseline twin) and a peak RSS ratio; targets their path.
const ReportSchema = "orchard.bench/v2"

// Report is one suite run: the machine, the settings, a cell per target and
// load, the ratios against the floors (and the baseline binary) and the
// targets' checks.
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
	// The orchard binary under test and the baseline binary, if any, with
	// the commits they were built from (when the build recorded one).
	Bin            string `json:"bin,omitempty"`
	BinCommit      string `json:"bin_commit,omitempty"`
	BaselineBin    string `json:"baseline_bin,omitempty"`
	BaselineCommit string `json:"baseline_commit,omitempty"`
}

// TargetInfo names a target and says whether it ran.
type TargetInfo struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	Desc string `json:"desc"`
	// Path is, for an orchard target, "plain" or "token" (vLLM token
	// injection); "" for the upstream and the bare proxies.
	Path string `json:"path,omitempty"`
	// BaselineOf is, for a target run by the baseline binary, the key of
	// the same target run by the binary under test.
	BaselineOf string `json:"baseline_of,omitempty"`
	Skipped    string `json:"skipped,omitempty"`
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
	ProxyCPU float64 `json:"proxy_cpu_s_per_1k"`
	// ProxySys is the part of ProxyCPU spent in the kernel (system time):
	// mostly loopback TCP, which the bare proxy pays as well; what a
	// recording proxy adds is mostly user time. How the two split differs
	// between machines, and with it the ratios of CPU per request.
	ProxySys  float64 `json:"proxy_sys_cpu_s_per_1k,omitempty"`
	UpCPU     float64 `json:"upstream_cpu_s_per_1k"`
	RedisCPU  float64 `json:"redis_cpu_s_per_1k,omitempty"`
	ClientCPU float64 `json:"client_cpu_s_per_1k"`
	// The proxy process's read and write system calls per sample: how many
	// events one read or write carries (fewer calls, larger batches).
	ProxyReads  float64 `json:"proxy_reads_per_req,omitempty"`
	ProxyWrites float64 `json:"proxy_writes_per_req,omitempty"`
	PeakRSSMB   float64 `json:"proxy_peak_rss_mb"` // VmHWM of the proxy process
	// PeakAnonMB is the largest RssAnon of the proxy process sampled every
	// 100 ms: its peak RSS without the pages of its binary (orchard's is
	// several times the size of the bare proxy's), to a sample's accuracy.
	PeakAnonMB float64 `json:"proxy_peak_anon_mb,omitempty"`
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
	// Rounds holds each round's own figures, in round order, when the cell
	// ran more than once (--rounds).
	Rounds []Round `json:"rounds,omitempty"`
}

// Round is one round of a cell: its throughput and the proxy's CPU seconds
// per 1000 samples (0 for a).
type Round struct {
	Throughput float64 `json:"req_per_s"`
	ProxyCPU   float64 `json:"proxy_cpu_s_per_1k,omitempty"`
	// PeakRSSMB is the peak RSS of the round's proxy process (each round
	// starts its own); the cell's is the largest of them.
	PeakRSSMB float64 `json:"proxy_peak_rss_mb,omitempty"`
}

// Ratio compares a recording proxy with a base under one closed-loop load
// in the same run: the bare proxy (b), for the token path also the bare
// proxy whose client asks for ids (b+ids), and with a baseline binary the
// same target run by it (c vs c').
type Ratio struct {
	Target      string  `json:"target"`
	Key         string  `json:"key"`
	Base        string  `json:"base"` // the base's key: b, b+ids, c', ...
	Concurrency int     `json:"concurrency"`
	Throughput  float64 `json:"throughput_ratio"`   // target / base
	CPU         float64 `json:"cpu_per_req_ratio"`  // target / base, proxy process
	RSS         float64 `json:"peak_rss_ratio"`     // target / base, proxy process
	P50Delta    float64 `json:"total_p50_delta_ms"` // target - base
	P99Delta    float64 `json:"total_p99_delta_ms"` // target - base
	// With several rounds, the throughput and CPU ratios of each round
	// (round i of the target against round i of the base, which ran beside
	// it): how far the machine's noise moves the ratios above.
	ThroughputRounds []float64 `json:"throughput_ratio_rounds,omitempty"`
	CPURounds        []float64 `json:"cpu_per_req_ratio_rounds,omitempty"`
	// RSSRounds are the peak RSS ratios of each round: the peak is
	// reached in a load's first second or two, and moves by tens of
	// percent between processes.
	RSSRounds []float64 `json:"peak_rss_ratio_rounds,omitempty"`
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
	r.Settings.Bin, r.Settings.BinCommit = s.cfg.Bin, binCommit(s.cfg.Bin)
	if s.cfg.BaselineBin != "" {
		r.Settings.BaselineBin, r.Settings.BaselineCommit = s.cfg.BaselineBin, binCommit(s.cfg.BaselineBin)
	}
	for _, t := range s.targets {
		r.Targets = append(r.Targets, t.info(s.skipped[t.Key]))
		if why := s.skipped[t.Key]; why != "" {
			r.Notes = append(r.Notes, fmt.Sprintf("(%s) %s skipped: %s", t.Key, t.Name, why))
		}
	}
	for _, k := range s.order {
		if s.skipped[k.target] != "" {
			continue
		}
		r.Cells = append(r.Cells, s.cells[k].cell(k, s.target(k.target)))
	}
	r.compare()
	return r
}

// info describes t for the report.
func (t target) info(skipped string) TargetInfo {
	ti := TargetInfo{Key: t.Key, Name: t.Name, Desc: t.Desc, BaselineOf: t.of, Skipped: skipped}
	switch {
	case t.recording() && t.tokens:
		ti.Path = "token"
	case t.recording():
		ti.Path = "plain"
	}
	return ti
}

// cell reduces a cellRun of target t.
func (cr *cellRun) cell(k cellKey, t target) Cell {
	c := Cell{Target: t.Name, Key: t.Key, Mode: k.mode, Concurrency: k.conc, Rate: k.rate,
		Summary: cr.m.Summarize(), Notes: cr.notes}
	per1k := func(d time.Duration) float64 {
		if c.Requests == 0 {
			return 0
		}
		return round(d.Seconds()*1000/float64(c.Requests), 3)
	}
	c.ProxyCPU, c.UpCPU, c.RedisCPU, c.ClientCPU = per1k(cr.proxyCPU), per1k(cr.upCPU), per1k(cr.redisCPU), per1k(cr.clientCPU)
	c.ProxySys = per1k(cr.proxySys)
	if c.Requests > 0 { // a runs no proxy: its counts are 0, which omitempty leaves out
		c.ProxyReads = round(float64(cr.proxyReads)/float64(c.Requests), 1)
		c.ProxyWrites = round(float64(cr.proxyWrites)/float64(c.Requests), 1)
	}
	c.PeakRSSMB = round(float64(cr.peakRSS)/(1<<20), 1)
	c.PeakAnonMB = round(float64(cr.peakAnon)/(1<<20), 1)
	c.Sent, c.Recorded, c.Spilled = cr.sent, cr.recorded, cr.spilled
	if len(cr.perRound) > 1 {
		c.Rounds = cr.perRound
	}
	if cr.rounds > 0 {
		c.LoadStart = round(cr.loadStart/float64(cr.rounds), 2)
		c.LoadEnd = round(cr.loadEnd/float64(cr.rounds), 2)
	}
	return c
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

// binCommit is the commit a Go binary was built from (with "+dirty" for a
// modified tree), read from its build info; "" if it carries none.
func binCommit(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return ""
	}
	commit := ""
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			commit = s.Value + commit
		case s.Key == "vcs.modified" && s.Value == "true":
			commit += "+dirty"
		}
	}
	return commit
}

// gitHead reads the commit checked out in dir's .git, without running git
// (builds with -buildvcs=false carry no revision); "" if unknown. In a
// linked worktree .git is a file naming the worktree's git directory, whose
// commondir holds the branches.
func gitHead(dir string) string {
	gitDir, common := gitDirs(filepath.Join(dir, ".git"))
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return ""
	}
	ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
	if !ok {
		return strings.TrimSpace(string(head))
	}
	if b, err := os.ReadFile(filepath.Join(common, ref)); err == nil {
		return strings.TrimSpace(string(b))
	}
	packed, err := os.ReadFile(filepath.Join(common, "packed-refs"))
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

// gitDirs returns the git directory that .git (dotGit) is or points to, and
// the directory that holds its refs.
func gitDirs(dotGit string) (gitDir, common string) {
	b, err := os.ReadFile(dotGit)
	if err != nil {
		return dotGit, dotGit // a directory, or nothing
	}
	gitDir = strings.TrimSpace(strings.TrimPrefix(string(b), "gitdir:"))
	if !filepath.IsAbs(gitDir) {
		gitDir = filepath.Join(filepath.Dir(dotGit), gitDir)
	}
	common = gitDir
	if c, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		if common = strings.TrimSpace(string(c)); !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
	}
	return gitDir, common
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
