package local

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// reportLatency adds p50 and p99 of lat, in milliseconds, to b's output.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}

// BenchmarkExecLatency measures one exec round trip the way a harness's
// tool call pays it: Go client -> envd HTTP API -> agent over the jail's
// Unix socket -> fork/exec of `true` -> result back. Target p50 <= 10 ms.
func BenchmarkExecLatency(b *testing.B) {
	e := newEnv(b, envd.Options{})
	sb := e.create(b, envd.Spec{})
	ctx := context.Background()
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		res, err := sb.Exec(ctx, envd.ExecRequest{Cmd: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %+v %v", res, err)
		}
		lat = append(lat, time.Since(t0))
	}
	reportLatency(b, lat)
}

// BenchmarkCreateLatency measures sandbox creation through the API: a new
// bubblewrap jail with namespaces and cgroups, up to the agent answering
// its first request. Delete runs too but is not in the percentiles.
// Target p50 <= 50 ms.
func BenchmarkCreateLatency(b *testing.B) {
	e := newEnv(b, envd.Options{})
	ctx := context.Background()
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		sb, err := e.c.Create(ctx, envd.Spec{Resources: envd.Resources{PIDs: 256}})
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if err := sb.Close(); err != nil {
			b.Fatal(err)
		}
	}
	reportLatency(b, lat)
}
