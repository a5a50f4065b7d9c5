package loadgen

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReportChecks(t *testing.T) {
	cell := func(key, name string, conc int, thr, cpu, p50, p99, rss float64, errs int) Cell {
		return Cell{Target: name, Key: key, Mode: "closed", Concurrency: conc, ProxyCPU: cpu, PeakRSSMB: rss,
			Summary: Summary{Throughput: thr, Errors: errs, Total: Dist{P50: p50, P99: p99}}}
	}
	r := &Report{
		Targets: []TargetInfo{{Key: "a", Name: "upstream"}, {Key: "b", Name: "bare"}, {Key: "c", Name: "orchard", Path: "plain"},
			{Key: "d", Name: "orchard-redis", Path: "plain", Skipped: "no redis"}},
		Cells: []Cell{
			cell("a", "upstream", 1, 400, 0, 2.0, 5, 0, 0),
			cell("b", "bare", 1, 380, 1.0, 2.2, 6, 30, 0),
			cell("c", "orchard", 1, 370, 1.2, 2.3, 8, 40, 0), // p50 +0.1 ok, p99 +2 fail
			cell("b", "bare", 8, 500, 1.0, 10, 20, 30, 0),
			cell("c", "orchard", 8, 460, 1.4, 11, 22, 40, 1), // thr 0.92 ok, cpu 1.4 fail, 1 error
			cell("b", "bare", 256, 500, 1.0, 10, 20, 60, 0),
			cell("c", "orchard", 256, 500, 1.0, 10, 20, 70, 0), // rss fail
		},
	}
	r.compare()
	got := map[string]bool{}
	for _, c := range r.Checks {
		got[c.Target+": "+c.Name] = c.Pass
	}
	want := map[string]bool{
		"upstream: zero errors and truncated streams":       true,
		"bare: zero errors and truncated streams":           true,
		"orchard: zero errors and truncated streams":        false,
		"orchard: 1 client: total p50 within +0.15 ms of b": true,
		"orchard: 1 client: total p99 within +1 ms of b":    false,
		"orchard: 8 clients: throughput >= 0.9x b":          true,
		"orchard: 8 clients: CPU per request <= 1.3x b":     false,
		"orchard: 256 streams: peak RSS <= 64 MB":           false,
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("check %q = %v (present %v), want %v", k, g, ok, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d checks, want %d: %v", len(got), len(want), got)
	}
	if c := r.Cells[2]; c.AddedP50 != 0.3 || c.AddedP99 != 3 {
		t.Errorf("orchard c=1 added p50/p99 = %v/%v, want 0.3/3", c.AddedP50, c.AddedP99)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil || !strings.Contains(b.String(), "FAIL orchard") {
		t.Errorf("WriteTable = %v, want a table with failing checks:\n%s", err, b.String())
	}
}

func TestReadProcSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	st, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PeakRSS <= 0 || st.RSS <= 0 || st.PeakRSS < st.RSS {
		t.Errorf("readProc(self) = %+v, want 0 < RSS <= PeakRSS", st)
	}
	if st.Sys < 0 || st.Sys > st.CPU {
		t.Errorf("readProc(self): system time %v of %v CPU, want a part of it", st.Sys, st.CPU)
	}
	// Ten writes of this process's own make syscw grow by ten at least.
	f, err := os.Create(filepath.Join(t.TempDir(), "w"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 10 {
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	after, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/self/io"); err != nil {
		return // hidden here: the counts stay 0
	}
	if st.Reads <= 0 || after.Writes-st.Writes < 10 {
		t.Errorf("system calls before %d/%d, after ten writes %d/%d: want the writes counted", st.Reads, st.Writes, after.Reads, after.Writes)
	}
}

// TestTokenPathChecks compares the token path with b+ids (and b), and an
// orchard target with its baseline twin, which gets no cost checks itself.
func TestTokenPathChecks(t *testing.T) {
	cell := func(key string, conc int, thr, cpu, p50, rss float64) Cell {
		return Cell{Target: key, Key: key, Mode: "closed", Concurrency: conc, ProxyCPU: cpu, PeakRSSMB: rss,
			Summary: Summary{Throughput: thr, Total: Dist{P50: p50, P99: p50 * 2}}}
	}
	r := &Report{
		Targets: []TargetInfo{{Key: "b", Name: "b"}, {Key: "b+ids", Name: "b+ids"},
			{Key: "f", Name: "f", Path: "token"}, {Key: "f'", Name: "f'", Path: "token", BaselineOf: "f"}},
		Cells: []Cell{
			cell("b", 8, 1000, 1.0, 5, 40), cell("b+ids", 8, 800, 1.2, 6, 50),
			cell("f", 8, 760, 1.7, 7, 100), // vs b+ids: thr 0.95 ok, cpu 1.417 ok
			cell("f'", 8, 700, 2.0, 8, 120),
			cell("b", 256, 1000, 1.0, 5, 60), cell("b+ids", 256, 800, 1.2, 6, 80),
			cell("f", 256, 700, 1.9, 9, 170), // rss 2.125x b+ids: fail
			cell("f'", 256, 700, 1.9, 9, 150),
		},
	}
	r.compare()
	ratios := map[string]Ratio{}
	for _, ra := range r.Ratios {
		ratios[fmt.Sprintf("%s/%s@%d", ra.Key, ra.Base, ra.Concurrency)] = ra
	}
	for k, want := range map[string]float64{"f/b@8": 0.76, "f/b+ids@8": 0.95, "f/f'@8": 1.086, "f'/b+ids@8": 0.875} {
		if got := ratios[k].Throughput; got != want {
			t.Errorf("throughput ratio %s = %v, want %v", k, got, want)
		}
	}
	if _, ok := ratios["f'/f'@8"]; ok || len(r.Ratios) != 10 {
		t.Errorf("got %d ratios %v, want 10 (f and f' vs b and b+ids, f vs f')", len(r.Ratios), ratios)
	}
	got := map[string]bool{}
	for _, c := range r.Checks {
		got[c.Target+": "+c.Name] = c.Pass
	}
	for k, w := range map[string]bool{
		"f: 8 clients: throughput >= 0.9x b+ids":      true,
		"f: 8 clients: CPU per request <= 1.5x b+ids": true,
		"f: 256 streams: peak RSS <= 2x b+ids":        false,
	} {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("check %q = %v (present %v), want %v; all: %v", k, g, ok, w, got)
		}
	}
	for k := range got {
		if strings.HasPrefix(k, "f': ") && !strings.Contains(k, "zero errors") {
			t.Errorf("baseline twin has a cost check %q", k)
		}
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil || !strings.Contains(b.String(), "vs b+ids") || !strings.Contains(b.String(), "baseline") {
		t.Errorf("WriteTable = %v, want blocks vs b+ids and vs the baseline:\n%s", err, b.String())
	}
}

func TestGitHeadInWorktree(t *testing.T) {
	dir := t.TempDir()
	common := filepath.Join(dir, "main.git")
	wt := filepath.Join(common, "worktrees", "wt")
	for _, f := range []struct{ path, body string }{
		{filepath.Join(common, "refs", "heads", "bench"), "abc123\n"},
		{filepath.Join(wt, "HEAD"), "ref: refs/heads/bench\n"},
		{filepath.Join(wt, "commondir"), "../..\n"},
		{filepath.Join(dir, "tree", ".git"), "gitdir: " + wt + "\n"},
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := gitHead(filepath.Join(dir, "tree")); got != "abc123" {
		t.Errorf("gitHead(worktree) = %q, want abc123", got)
	}
}

// TestRoundRatios divides round i of a target by round i of its base, and
// prints the spread beside the merged ratio.
func TestRoundRatios(t *testing.T) {
	cell := func(key string, thr, cpu float64, rounds ...Round) Cell {
		return Cell{Target: key, Key: key, Mode: "closed", Concurrency: 64, ProxyCPU: cpu,
			Summary: Summary{Throughput: thr}, Rounds: rounds}
	}
	r := &Report{
		Targets: []TargetInfo{{Key: "b", Name: "b"}, {Key: "c", Name: "c", Path: "plain"}},
		Cells: []Cell{
			cell("b", 1000, 1.0, Round{Throughput: 1000, ProxyCPU: 1.0, PeakRSSMB: 40}, Round{Throughput: 1000, ProxyCPU: 1.0, PeakRSSMB: 50}),
			cell("c", 925, 1.3, Round{Throughput: 950, ProxyCPU: 1.2, PeakRSSMB: 100}, Round{Throughput: 900, ProxyCPU: 1.4, PeakRSSMB: 90}),
		},
	}
	r.compare()
	if len(r.Ratios) != 1 {
		t.Fatalf("ratios = %+v, want one", r.Ratios)
	}
	ra := r.Ratios[0]
	if fmt.Sprint(ra.ThroughputRounds) != "[0.95 0.9]" || fmt.Sprint(ra.CPURounds) != "[1.2 1.4]" || fmt.Sprint(ra.RSSRounds) != "[2.5 1.8]" {
		t.Errorf("per-round ratios = %v, %v and %v, want [0.95 0.9], [1.2 1.4] and [2.5 1.8]", ra.ThroughputRounds, ra.CPURounds, ra.RSSRounds)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "0.900-0.950   1.200-1.400   1.800-2.500") {
		t.Errorf("table lacks the rounds' spread:\n%s", b.String())
	}
	// A base that ran a different number of rounds gives no spread.
	r.Cells[0].Rounds = r.Cells[0].Rounds[:1]
	r.Ratios, r.Checks = nil, nil
	r.compare()
	if ra := r.Ratios[0]; ra.ThroughputRounds != nil || ra.CPURounds != nil {
		t.Errorf("rounds that do not pair gave %v and %v", ra.ThroughputRounds, ra.CPURounds)
	}
}

// TestTableSysShare: a row shows the kernel's share of the proxy's CPU.
func TestTableSysShare(t *testing.T) {
	r := &Report{Cells: []Cell{{Target: "orchard", Key: "c", Mode: "closed", Concurrency: 8, ProxyCPU: 0.800, ProxySys: 0.248}}}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	var row string
	for line := range strings.Lines(b.String()) {
		if strings.HasPrefix(line, "  c orchard") {
			row = line
		}
	}
	if f := strings.Fields(row); len(f) < 12 || f[10] != "0.800" || f[11] != "31" {
		t.Errorf("row %q: want cpu/1k 0.800 then sys%% 31", row)
	}
}

// TestSteadyHost: a floor whose rounds' throughput moved by more than a
// tenth at one load fails the steady-host check, with the load named;
// floors of one round, or that did not run, get no such check.
func TestSteadyHost(t *testing.T) {
	cell := func(key string, conc int, thr ...float64) Cell {
		c := Cell{Target: key, Key: key, Mode: "closed", Concurrency: conc}
		for _, v := range thr {
			c.Rounds = append(c.Rounds, Round{Throughput: v})
		}
		return c
	}
	r := &Report{
		Targets: []TargetInfo{{Key: "b", Name: "bare"}, {Key: "b+ids", Name: "bare-ids"}},
		Cells: []Cell{
			cell("b", 8, 1000, 950), cell("b", 256, 1279, 1017, 1200), // 20.5% apart at 256
			cell("b+ids", 8, 900, 850), cell("b+ids", 64, 1000, 980), // 5.6% at 8
		},
	}
	r.compare()
	var got []string
	for _, c := range r.Checks {
		if strings.HasPrefix(c.Name, "steady host") {
			got = append(got, fmt.Sprintf("%s %s %v", c.Target, c.Got, c.Pass))
		}
	}
	want := []string{"bare 20.5% apart at 256 clients false", "bare-ids 5.6% apart at 8 clients true"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("steady-host checks = %q, want %q", got, want)
	}
	r.Cells, r.Checks = []Cell{cell("b", 8, 1000)}, nil
	r.compare()
	for _, c := range r.Checks {
		if strings.HasPrefix(c.Name, "steady host") {
			t.Errorf("one round gave %+v", c)
		}
	}
}
