//go:build unix

package embedded

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// BenchmarkWriteBatchSizes writes calls of 8-turn episodes in writes of
// 1 to 32 calls (fsync off), as the pipeline hands them over: a few at a
// time from a lightly loaded proxy, more behind a write in flight. Besides
// time it reports the process's CPU time a call (cpu-ns/call), which a
// write spread over goroutines can raise while it lowers the time.
func BenchmarkWriteBatchSizes(b *testing.B) {
	for _, batch := range []int{1, 5, 12, 32} {
		b.Run(fmt.Sprintf("calls=%d", batch), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			const turns = 8
			template := chatEpisode("bench", turns, 500)
			calls := make([]*recorder.Call, batch)
			n := 0
			cpu0 := cpuTime(b)
			for b.Loop() {
				for i := range calls {
					c := *template[n%turns]
					c.EpisodeID = fmt.Sprintf("ep-%d", n/turns)
					c.CallID = fmt.Sprintf("%s-%d", c.EpisodeID, n%turns)
					calls[i] = &c
					n++
				}
				writeT(b, s, calls...)
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(n), "cpu-ns/call")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/call")
		})
	}
}

// cpuTime is the process's user and system CPU time so far, in ns.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
