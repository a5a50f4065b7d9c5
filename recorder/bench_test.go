package recorder

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// BenchmarkEncode measures the store's per-call work on a vLLM chat
// episode (30 turns, prompts of 2,000 to 6,350 ids): Encode and Pack of
// every call with dedup, as the embedded and Redis writers do, and the
// self-contained MarshalCall the spill file uses. Reported per episode.
func BenchmarkEncode(b *testing.B) {
	calls := vllmEpisode(30)
	b.Run("dedup", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			e := NewEpisodeEncoder(true)
			for _, c := range calls {
				d, blocks, err := e.Encode(c)
				if err != nil {
					b.Fatal(err)
				}
				buf = Pack(buf[:0], d, blocks)
			}
		}
	})
	for name, calls := range fixtureEpisodes(b) {
		// The captured requests of a real harness (18-64 KB of tool
		// schemas with every call), sent again and again in one episode,
		// reported per call: what a call that repeats what its episode
		// has stored costs, its hashing and cutting included.
		b.Run("harness="+strings.TrimSuffix(name, ".jsonl"), func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			e := NewEpisodeEncoder(true)
			i := 0
			for b.Loop() {
				d, blocks, err := e.Encode(calls[i%len(calls)])
				if err != nil {
					b.Fatal(err)
				}
				buf = Pack(buf[:0], d, blocks)
				i++
			}
		})
	}
	b.Run("spill", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, c := range calls {
				if _, err := MarshalCall(c); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkDecode measures reading the same episode back.
func BenchmarkDecode(b *testing.B) {
	var s storedEpisode
	e := NewEpisodeEncoder(true)
	for _, c := range vllmEpisode(30) {
		s.write(b, e, c)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.read(b)
	}
}

// BenchmarkEncoderMemory reports the heap an encoder keeps for an episode
// of eight vLLM calls once they are encoded (heap-B/episode): what a store
// holds per unfinished episode, up to its bounds.
func BenchmarkEncoderMemory(b *testing.B) {
	for _, compact := range []bool{false, true} {
		b.Run(map[bool]string{false: "running", true: "compacted"}[compact], func(b *testing.B) {
			benchEncoderMemory(b, compact)
		})
	}
}

// benchEncoderMemory reports the heap an encoder of an eight-call vLLM
// episode holds, after Compact (an idle episode's) if compact.
func benchEncoderMemory(b *testing.B, compact bool) {
	calls := vllmEpisode(8)
	var encs []*EpisodeEncoder
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for b.Loop() {
		enc := NewEpisodeEncoder(true)
		for _, c := range calls {
			cc := *c
			cc.EpisodeID, cc.prep = fmt.Sprintf("ep-%d", len(encs)), nil
			if _, _, err := enc.Encode(&cc); err != nil {
				b.Fatal(err)
			}
		}
		if compact {
			enc.Compact()
		}
		encs = append(encs, enc)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(encs)), "heap-B/episode")
	bytes := 0
	for _, e := range encs {
		bytes += e.Bytes()
	}
	b.ReportMetric(float64(bytes)/float64(len(encs)), "est-B/episode")
	runtime.KeepAlive(encs)
}
