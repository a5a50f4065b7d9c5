package loadgen

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteTable prints the report for people: a block per load, the ratios
// against each base, then the checks.
func (r *Report) WriteTable(w io.Writer) error {
	var b bytes.Buffer
	r.writeHeader(&b)
	r.writeCells(&b)
	r.writeRatios(&b)
	fmt.Fprintf(&b, "\ntargets (a FAIL here does not fail the command)\n")
	for _, c := range r.Checks {
		verdict := "FAIL"
		if c.Pass {
			verdict = "pass"
		}
		fmt.Fprintf(&b, "  %-4s %-24s %-46s %s\n", verdict, c.Target, c.Name, c.Got)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func (r *Report) writeHeader(b *bytes.Buffer) {
	fmt.Fprintf(b, "orchard-bench  %s  %s, %d cores, load avg %.1f -> %.1f, %s, commit %s\n",
		r.StartedAt.Format(time.RFC3339), r.Machine.CPU, r.Machine.Cores, r.Machine.LoadStart, r.Machine.LoadEnd,
		r.Machine.Go, short(r.Machine.Commit))
	sc := r.Settings.Scenario
	fmt.Fprintf(b, "scenario: %d turns/episode, prompts %d..~%d B, %d..%d chunks of %d B text, first byte %v, chunk delay %v; %gs warmup + %gs per cell, %d round(s)\n",
		sc.Turns, sc.PromptMin, sc.PromptMax, sc.ChunksMin, sc.ChunksMax, sc.ChunkBytes, sc.FirstByteDelay, sc.ChunkDelay,
		r.Settings.WarmupS, r.Settings.DurationS, r.Settings.Rounds)
	if sc.NoLogprobs {
		fmt.Fprintf(b, "the upstream ignores logprobs (--no-logprobs): the token path carries token ids only\n")
	}
	if sc.Lifecycle {
		fmt.Fprintf(b, "orchard targets create and finish every episode through the episode API (--lifecycle)\n")
	}
	if st := r.Settings; st.BaselineBin != "" {
		fmt.Fprintf(b, "orchard: %s (commit %s); baseline (x'): %s (commit %s)\n",
			st.Bin, orUnknown(short(st.BinCommit)), st.BaselineBin, orUnknown(short(st.BaselineCommit)))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(b, "note: %s\n", n)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// writeCells prints a block of rows per load.
func (r *Report) writeCells(b *bytes.Buffer) {
	var last string
	for _, c := range r.Cells {
		head := fmt.Sprintf("%s c=%d", c.Mode, c.Concurrency)
		if c.Mode == "open" {
			head = fmt.Sprintf("open loop %.0f req/s", c.Rate)
		}
		if head != last {
			fmt.Fprintf(b, "\n%s (load avg %.1f)\n", head, c.LoadStart)
			fmt.Fprintf(b, "  %-28s %6s %4s %5s %7s  %-27s  %-27s %7s %7s %7s %4s %7s %11s %6s %6s\n", "target", "ok", "err", "trunc", "req/s",
				"ttfb p50/p90/p99/max ms", "total p50/p90/p99/max ms", "+p50", "+p99", "cpu/1k", "sys%", "up/1k", "rd/wr /req", "rssMB", "anonMB")
			last = head
		}
		writeCell(b, c)
	}
}

// writeRatios prints a block of ratios per kind of base.
func (r *Report) writeRatios(b *bytes.Buffer) {
	for rank := range 4 {
		first := true
		for _, ra := range r.Ratios {
			rk, title := baseBlock(ra.Base)
			if rk != rank {
				continue
			}
			if first {
				fmt.Fprintf(b, "\n%s\n  %-28s %-6s %4s %9s %9s %9s %12s %12s %13s %13s %13s\n", title, "target", "base", "c",
					"thr x", "cpu/req x", "rss x", "p50 delta ms", "p99 delta ms", "thr rounds", "cpu rounds", "rss rounds")
				first = false
			}
			fmt.Fprintf(b, "  %-28s %-6s %4d %9.3f %9.3f %9.3f %12.3f %12.3f %13s %13s %13s\n", ra.Key+" "+ra.Target, ra.Base,
				ra.Concurrency, ra.Throughput, ra.CPU, ra.RSS, ra.P50Delta, ra.P99Delta,
				spread(ra.ThroughputRounds), spread(ra.CPURounds), spread(ra.RSSRounds))
		}
	}
}

// writeCell prints one row of the table and its notes.
func writeCell(b *bytes.Buffer, c Cell) {
	proxyCPU, rss, anon := fmt.Sprintf("%.3f", c.ProxyCPU), fmt.Sprintf("%.1f", c.PeakRSSMB), fmt.Sprintf("%.1f", c.PeakAnonMB)
	calls, sys := fmt.Sprintf("%.1f/%.1f", c.ProxyReads, c.ProxyWrites), "-"
	if c.ProxyCPU > 0 {
		sys = fmt.Sprintf("%.0f", 100*c.ProxySys/c.ProxyCPU)
	}
	if c.Key == "a" {
		proxyCPU, rss, anon, calls = "-", "-", "-", "-"
	}
	fmt.Fprintf(b, "  %-28s %6d %4d %5d %7.1f  %-27s  %-27s %7.2f %7.2f %7s %4s %7.3f %11s %6s %6s\n",
		c.Key+" "+c.Target, c.Requests, c.Errors, c.Truncated, c.Throughput, dist(c.TTFB), dist(c.Total),
		c.AddedP50, c.AddedP99, proxyCPU, sys, c.UpCPU, calls, rss, anon)
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
