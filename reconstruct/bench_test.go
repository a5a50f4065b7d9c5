package reconstruct

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// benchEpisodes is how many episodes BenchmarkExport exports; the full
// scale is -bench.episodes=1000 (about 0.5-1 GB of records in memory).
var benchEpisodes = flag.Int("bench.episodes", 20, "episodes per BenchmarkExport run")

// benchSource builds episodes of one agent thread with turns calls each,
// whose history grows to about historyKB by the last call, and returns
// them with the size of their orchard.call/v1 JSON records.
func benchSource(b *testing.B, api recorder.API, episodes, turns, historyKB int) (*memSource, int64, int) {
	b.Helper()
	src := newMemSource()
	var size int64
	calls := 0
	for e := range episodes {
		s := newSim(api, fmt.Sprintf("ep-%d", e), uint64(e+1), true)
		s.bodyPad = historyKB * 1024 / (2 * turns)
		th := s.newThread("You are an agent.", "bash")
		s.user(th, "do the task")
		for i := range turns {
			r := s.reply(1, "")
			if i == turns-1 {
				r = s.reply(0, "done")
			}
			s.call(th, r)
			s.results(th, r)
		}
		for _, c := range s.calls {
			raw, err := json.Marshal(c)
			if err != nil {
				b.Fatal(err)
			}
			size += int64(len(raw))
		}
		calls += len(s.calls)
		src.add(recorder.Episode{ID: s.episode}, s.calls)
	}
	return src, size, calls
}

// BenchmarkExport measures export throughput on one worker (one core) in
// bytes of stored orchard.call/v1 records per second, for the export
// workload (scaled down unless -bench.episodes=1000): 50-turn episodes
// whose history grows to 20 KB.
// Target: >= 100 MB/s per core for trajectories.
func BenchmarkExport(b *testing.B) {
	for _, format := range []string{FormatTrajectories, FormatTurns} {
		for _, api := range []recorder.API{apiChat, apiMessages, apiResponses} {
			b.Run(format+"/"+string(api), func(b *testing.B) {
				src, size, calls := benchSource(b, api, *benchEpisodes, 50, 20)
				b.SetBytes(size)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Export(context.Background(), src, io.Discard, Options{Format: format, Workers: 1}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(calls)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// BenchmarkExportTurns compares episodes of 50 and 100 turns with the same
// final history size: linear reconstruction takes about twice as long per
// episode for twice the turns (and twice the record bytes); a quadratic
// one would take four times as long.
func BenchmarkExportTurns(b *testing.B) {
	for _, turns := range []int{50, 100, 200} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			src, size, _ := benchSource(b, apiChat, 4, turns, 20)
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Export(context.Background(), src, io.Discard, Options{Workers: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkExportEncoding compares parquet with JSONL output for the
// trainer formats on the BenchmarkExport workload (chat, one worker):
// MB/s of orchard.call/v1 records read per core. Parquet rows are encoded
// on the goroutine that writes the file, JSONL lines on the worker.
func BenchmarkExportEncoding(b *testing.B) {
	for _, format := range []string{FormatSFT, FormatVerl, FormatTRL, FormatOpenRLHF, FormatSlime, FormatTokens} {
		for _, enc := range []string{EncodingJSONL, EncodingParquet} {
			b.Run(format+"/"+enc, func(b *testing.B) {
				src, size, _ := benchSource(b, apiChat, *benchEpisodes, 50, 20)
				b.SetBytes(size)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Export(context.Background(), src, io.Discard, Options{Format: format, Encoding: enc, Workers: 1}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
