package loadgen

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// Config configures [RunSuite]. Zero fields take the defaults in their
// comments.
type Config struct {
	// Bin is the orchard binary, which serves `proxy` and reads the stores
	// back. Required.
	Bin string
	// BaselineBin, if set, is a second orchard binary (say, built from the
	// previous commit): every selected orchard target also runs on it, as a
	// twin keyed with a "'" (c', f'), in the same sweep, right after its
	// original, so that the two are compared under the same load.
	BaselineBin string
	// BenchBin is the orchard-bench binary, which serves `upstream` and
	// `bare-proxy`. Required.
	BenchBin string
	// RedisServer is the redis-server binary; "" looks it up in PATH. Without
	// one the Redis targets are skipped with a note.
	RedisServer string
	// Targets are target keys (a..f, b+ids) or names; default all.
	Targets []string
	// Concurrency is the closed-loop sweep; default 1, 8, 64, 256.
	Concurrency []int
	// Warmup and Duration are per cell; default 2s and 6s.
	Warmup, Duration time.Duration
	// Rounds repeats the sweep, alternating the target order, and merges the
	// samples; default 1.
	Rounds int
	// OpenRate is the open-loop rate in requests/s, run once per target
	// after the sweep for OpenDuration (default Duration); 0 skips it.
	OpenRate     float64
	OpenDuration time.Duration
	Scenario     Scenario
	// WorkDir holds the stores and process logs; "" means a fresh temporary
	// directory, removed at the end.
	WorkDir string
	// Progress receives a line per cell; nil discards.
	Progress io.Writer
	// CPUProfiles, if set, is a directory that gets a CPU profile of each
	// orchard proxy over each measured window (see profile.go).
	CPUProfiles string
}

func (c *Config) defaults() {
	if len(c.Targets) == 0 {
		c.Targets = TargetKeys()
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = []int{1, 8, 64, 256}
	}
	if c.Warmup <= 0 {
		c.Warmup = 2 * time.Second
	}
	if c.Duration <= 0 {
		c.Duration = 6 * time.Second
	}
	if c.Rounds <= 0 {
		c.Rounds = 1
	}
	if c.OpenDuration <= 0 {
		c.OpenDuration = c.Duration
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	c.Scenario.Defaults()
}

// suite is one RunSuite's state.
type suite struct {
	cfg     Config
	targets []target
	work    string
	up      *proc
	redis   *proc // nil when Redis is unavailable
	q       *requests
	r       *rendered
	// bins are the copies of cfg.Bin and cfg.BaselineBin that the proxies
	// run from (see copyBinaries).
	bins    [2]string
	skipped map[string]string // target key -> why
	cells   map[cellKey]*cellRun
	order   []cellKey
	run     string
}

type cellKey struct {
	target string
	mode   string // "closed" or "open"
	conc   int
	rate   float64
}

// cellRun accumulates one cell over the rounds.
type cellRun struct {
	m                         Measurement
	proxyCPU, upCPU, redisCPU time.Duration
	proxySys                  time.Duration // the kernel's part of proxyCPU
	clientCPU                 time.Duration
	proxyReads, proxyWrites   int64         // the proxy's system calls
	roundCPU                  time.Duration // the proxy's CPU time in the last round's window
	perRound                  []Round
	peakRSS                   int64
	peakAnon                  int64   // sampled (see sampleAnon)
	loadStart, loadEnd        float64 // sums over rounds
	rounds                    int
	sent, recorded            int // requests sent to a recording proxy, and calls it stored (-1: unknown)
	spilled                   int // of recorded, calls that reached the store only by a restart's spill replay
	notes                     []string
}

// RunSuite starts the upstream (and Redis), runs every target at every
// concurrency, and returns the report. It stops every process it started.
func RunSuite(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if err := cfg.Scenario.Validate(); err != nil {
		return nil, err
	}
	s := &suite{cfg: cfg, skipped: map[string]string{}, cells: map[cellKey]*cellRun{},
		run: "r" + strconv.FormatInt(time.Now().Unix()%1e6, 10)}
	if err := s.selectTargets(); err != nil {
		return nil, err
	}
	started := time.Now()
	loadStart := loadAvg()
	if err := s.setup(ctx); err != nil {
		s.teardown()
		return nil, err
	}
	defer s.teardown()
	for round := range cfg.Rounds {
		order := s.targets
		if round%2 == 1 {
			order = reversed(order)
		}
		for _, c := range cfg.Concurrency {
			for _, t := range order {
				s.cell(ctx, t, cellKey{target: t.Key, mode: "closed", conc: c})
			}
		}
	}
	if cfg.OpenRate > 0 {
		for _, t := range s.targets {
			s.cell(ctx, t, cellKey{target: t.Key, mode: "open", rate: cfg.OpenRate})
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.report(started, loadStart), nil
}

// selectTargets resolves the configured keys, adding each orchard target's
// baseline twin after it when there is a baseline binary.
func (s *suite) selectTargets() error {
	for _, k := range s.cfg.Targets {
		t, ok := targetByKey(k)
		if !ok {
			return fmt.Errorf("unknown target %q (want one of %v)", k, TargetKeys())
		}
		s.targets = append(s.targets, t)
		if s.cfg.BaselineBin != "" && t.recording() {
			s.targets = append(s.targets, baselineTwin(t))
		}
	}
	return nil
}

// target returns the selected target with key k.
func (s *suite) target(k string) target {
	for _, t := range s.targets {
		if t.Key == k {
			return t
		}
	}
	return target{Key: k, Name: k}
}

// bin is the binary that runs t's proxy (and reads its store).
func (s *suite) bin(t target) string {
	switch {
	case t.bench:
		return s.cfg.BenchBin
	case t.of != "":
		return s.bins[1]
	}
	return s.bins[0]
}

func reversed(ts []target) []target {
	out := make([]target, len(ts))
	for i, t := range ts {
		out[len(ts)-1-i] = t
	}
	return out
}

// setup renders the scenario and starts the upstream and Redis.
func (s *suite) setup(ctx context.Context) error {
	var err error
	if s.work = s.cfg.WorkDir; s.work == "" {
		if s.work, err = os.MkdirTemp("", "orchard-bench-"); err != nil {
			return fmt.Errorf("make work dir: %w", err)
		}
	} else if err = os.MkdirAll(s.work, 0o755); err != nil {
		return fmt.Errorf("make work dir: %w", err)
	}
	if s.bins, err = copyBinaries(s.work, s.cfg.Bin, s.cfg.BaselineBin); err != nil {
		return err
	}
	if dir := s.cfg.CPUProfiles; dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("make profile dir: %w", err)
		}
	}
	if s.r, err = s.cfg.Scenario.render(); err != nil {
		return err
	}
	s.q = s.cfg.Scenario.newRequests()
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	argv := []string{s.cfg.BenchBin, "upstream", "--listen", addr, "--scenario", s.cfg.Scenario.MarshalFlag()}
	if s.up, err = startProc(ctx, "upstream", argv, nil, addr, s.work, httpReady); err != nil {
		return err
	}
	for _, t := range s.targets {
		if t.redis {
			s.startRedis(ctx)
			break
		}
	}
	return nil
}

// startRedis starts a private redis-server, or notes why the Redis targets
// are skipped.
func (s *suite) startRedis(ctx context.Context) {
	bin := s.cfg.RedisServer
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("redis-server"); err != nil {
			s.skipRedis("no redis-server in PATH")
			return
		}
	}
	addr, err := freeAddr()
	if err != nil {
		s.skipRedis(err.Error())
		return
	}
	_, port, _ := cutLast(addr, ':')
	dir := filepath.Join(s.work, "redis")
	_ = os.MkdirAll(dir, 0o755)
	argv := []string{bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--protected-mode", "yes"}
	if s.redis, err = startProc(ctx, "redis", argv, nil, addr, s.work, redisReady); err != nil {
		s.skipRedis(err.Error())
	}
}

func (s *suite) skipRedis(why string) {
	for _, t := range s.targets {
		if t.redis {
			s.skipped[t.Key] = why
		}
	}
}

func cutLast(s string, sep byte) (string, string, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func (s *suite) teardown() {
	for _, p := range []*proc{s.up, s.redis} {
		if p != nil {
			_ = p.stop()
		}
	}
	if s.cfg.WorkDir == "" && s.work != "" {
		_ = os.RemoveAll(s.work)
	}
}

// cell runs one target at one load, starting its proxy process fresh so
// that its peak RSS belongs to this load alone.
func (s *suite) cell(ctx context.Context, t target, key cellKey) {
	if ctx.Err() != nil {
		return
	}
	cr := s.cells[key]
	if cr == nil {
		cr = &cellRun{}
		s.cells[key] = cr
		s.order = append(s.order, key)
	}
	if why := s.skipped[t.Key]; why != "" {
		return
	}
	base, px, env, err := s.startTarget(ctx, t, key)
	if err != nil {
		if t.redis {
			s.skipped[t.Key] = err.Error()
		} else {
			cr.notes = append(cr.notes, err.Error())
			cr.m.Outcomes[Transport]++
		}
		fmt.Fprintf(s.cfg.Progress, "%-20s %-6s c=%-4d skipped: %v\n", t.Name, key.mode, key.conc, err)
		return
	}
	conns := max(key.conc, 64)
	if key.mode == "open" {
		conns = 1024
	}
	c := newClient(base, s.cfg.Scenario, s.q, s.r, conns, t.ids)
	load := Load{Concurrency: key.conc, Rate: key.rate, Warmup: s.cfg.Warmup, Duration: s.cfg.Duration,
		Run: fmt.Sprintf("%s-%s-%s%d", s.run, t.slug(), key.mode, key.conc)}
	if key.mode == "open" {
		load.Duration = s.cfg.OpenDuration
	}
	load.Mark = s.marker(cr, px)
	if env.pprof != "" {
		name := profileName(t.slug(), key, cr.rounds+1)
		load.Mark = profiling(ctx, s.cfg.CPUProfiles, env.pprof, name, profileSeconds(load.Duration), cr, load.Mark)
	}
	if t.store != nil && s.cfg.Scenario.Lifecycle {
		load.Create, load.Finish = c.Create, c.Finish
	}
	stopSampling := sampleAnon(px, &cr.peakAnon)
	m := Run(ctx, c, load)
	stopSampling()
	c.Close()
	var roundRSS int64
	if px != nil {
		if st, err := px.stat(); err == nil {
			roundRSS = st.PeakRSS
			cr.peakRSS = max(cr.peakRSS, st.PeakRSS)
		}
		if err := px.stop(); err != nil {
			cr.notes = append(cr.notes, err.Error())
		}
	}
	if t.store != nil {
		s.countRecords(ctx, cr, t, key, env, load.Run, m)
	}
	if s.redis != nil && t.redis {
		if err := redisCommand(ctx, s.redis.addr, "FLUSHALL"); err != nil {
			cr.notes = append(cr.notes, "redis flush: "+err.Error())
		}
	}
	cr.merge(m)
	sum := m.Summarize()
	cr.addRound(sum, px != nil, roundRSS)
	fmt.Fprintf(s.cfg.Progress, "%-20s %-6s c=%-4d %7.1f req/s  total p50 %7.2f ms  p99 %7.2f ms  errors %d  load %.1f\n",
		t.Name, key.mode, key.conc, sum.Throughput, sum.Total.P50, sum.Total.P99, sum.Errors, loadAvg())
}

// anonSample is how often sampleAnon reads the proxy's anonymous memory.
const anonSample = 100 * time.Millisecond

// sampleAnon reads px's anonymous resident memory every anonSample until
// the returned function is called (which reads it once more), keeping the
// largest in peak: the kernel keeps a peak of the whole RSS (VmHWM), which
// also counts the pages of the proxy's binary, but none of its own memory
// alone. A nil px samples nothing.
func sampleAnon(px *proc, peak *int64) (stop func()) {
	if px == nil {
		return func() {}
	}
	read := func() {
		if st, err := px.stat(); err == nil {
			*peak = max(*peak, st.Anon)
		}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(anonSample)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		read()
	}
}

// marker returns a [Load.Mark] that adds the CPU time the processes spend
// in the measured window, and the proxy's system calls, to cr.
func (s *suite) marker(cr *cellRun, px *proc) func(end bool) {
	var before [4]ProcStat
	return func(end bool) {
		now := s.snapshot(px)
		if !end {
			before = now
			cr.loadStart += loadAvg()
			return
		}
		cr.roundCPU = now[0].CPU - before[0].CPU
		cr.proxyCPU += cr.roundCPU
		cr.proxySys += now[0].Sys - before[0].Sys
		cr.upCPU += now[1].CPU - before[1].CPU
		cr.redisCPU += now[2].CPU - before[2].CPU
		cr.clientCPU += now[3].CPU - before[3].CPU
		cr.proxyReads += now[0].Reads - before[0].Reads
		cr.proxyWrites += now[0].Writes - before[0].Writes
		cr.loadEnd += loadAvg()
		cr.rounds++
	}
}

// snapshot reads the counters of the proxy (px, nil for the upstream
// target), the upstream, Redis and this process.
func (s *suite) snapshot(px *proc) [4]ProcStat {
	var out [4]ProcStat
	for i, p := range []*proc{px, s.up, s.redis} {
		if p != nil {
			out[i], _ = p.stat()
		}
	}
	out[3], _ = readProc(os.Getpid())
	return out
}

// startTarget starts t's proxy process, if it has one, and returns the base
// URL to load.
func (s *suite) startTarget(ctx context.Context, t target, key cellKey) (string, *proc, targetEnv, error) {
	upstream := "http://" + s.up.addr
	if t.args == nil {
		return upstream, nil, targetEnv{}, nil
	}
	addr, err := freeAddr()
	if err != nil {
		return "", nil, targetEnv{}, err
	}
	data := s.dataDir(t, key)
	_ = os.RemoveAll(data)
	if err := os.MkdirAll(data, 0o755); err != nil {
		return "", nil, targetEnv{}, fmt.Errorf("make data dir: %w", err)
	}
	e := targetEnv{upstream: upstream, listen: addr, data: filepath.Join(data, "store")}
	if s.redis != nil {
		e.redis = "redis://" + s.redis.addr + "/0"
	}
	if s.cfg.CPUProfiles != "" && t.recording() {
		if e.pprof, err = freeAddr(); err != nil {
			return "", nil, targetEnv{}, err
		}
	}
	argv := append([]string{s.bin(t)}, t.args(e)...)
	p, err := startProc(ctx, t.Name, argv, s.procEnv(t, key), addr, s.work, httpReady)
	if err != nil {
		return "", nil, targetEnv{}, err
	}
	return "http://" + addr, p, e, nil
}

// dataDir holds a cell's store and spill files.
func (s *suite) dataDir(t target, key cellKey) string {
	return filepath.Join(s.work, fmt.Sprintf("%s-%s-%d", t.Name, key.mode, key.conc))
}

// procEnv is the environment added to a proxy's: its spill directory
// (used with --redis; the embedded store spills under --data).
func (s *suite) procEnv(t target, key cellKey) []string {
	return []string{"ORCHARD_SPILL_DIR=" + filepath.Join(s.dataDir(t, key), "spill")}
}

// addRound keeps one round's throughput and, for a proxy target, its CPU
// per request, which the ratios divide round by round.
func (cr *cellRun) addRound(sum Summary, proxy bool, peakRSS int64) {
	r := Round{Throughput: sum.Throughput, PeakRSSMB: round(float64(peakRSS)/(1<<20), 1)}
	if proxy && sum.Requests > 0 {
		r.ProxyCPU = round(cr.roundCPU.Seconds()*1000/float64(sum.Requests), 3)
	}
	cr.perRound = append(cr.perRound, r)
	cr.roundCPU = 0
}

// merge adds another round's measurement.
func (cr *cellRun) merge(m *Measurement) {
	cr.m.Window += m.Window
	cr.m.Samples = append(cr.m.Samples, m.Samples...)
	for i, n := range m.Outcomes {
		cr.m.Outcomes[i] += n
	}
	cr.m.Errors = append(cr.m.Errors, m.Errors[:min(len(m.Errors), maxErrorDetails-len(cr.m.Errors))]...)
}
