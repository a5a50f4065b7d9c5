package loadgen

import (
	"os"
	"strings"
	"testing"
)

func TestReportChecks(t *testing.T) {
	cell := func(key, name string, conc int, thr, cpu, p50, p99, rss float64, errs int) Cell {
		return Cell{Target: name, Key: key, Mode: "closed", Concurrency: conc, ProxyCPU: cpu, PeakRSSMB: rss,
			Summary: Summary{Throughput: thr, Errors: errs, Total: Dist{P50: p50, P99: p99}}}
	}
	r := &Report{
		Targets: []TargetInfo{{Key: "a", Name: "upstream"}, {Key: "b", Name: "bare"}, {Key: "c", Name: "orchard"},
			{Key: "d", Name: "orchard-redis", Skipped: "no redis"}},
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
		"upstream: zero errors and truncated streams":          true,
		"bare: zero errors and truncated streams":              true,
		"orchard: zero errors and truncated streams":           false,
		"orchard: 1 client: total p50 within +0.15 ms of bare": true,
		"orchard: 1 client: total p99 within +1 ms of bare":    false,
		"orchard: 8 clients: throughput >= 0.9x bare":          true,
		"orchard: 8 clients: CPU per request <= 1.3x bare":     false,
		"orchard: 256 streams: peak RSS <= 64 MB":              false,
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
}
