package embedded

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/recorder"
)

// BenchmarkWrite measures the recorder's append path (encode, dedup,
// compress, frame, write) one call per WriteCalls, as the pipeline sends a
// live episode's calls, for short and long episodes with dedup on and off.
// calls/s is the append rate; MB/s counts request+response bytes taken in;
// disk-B/call is what each call cost on disk. fsync is off so the numbers
// measure this code, not the disk (see docs/recorder-embedded.md).
func BenchmarkWrite(b *testing.B) {
	for _, turns := range []int{10, 100} {
		for _, dedup := range []bool{true, false} {
			b.Run(fmt.Sprintf("turns=%d/dedup=%v", turns, dedup), func(b *testing.B) {
				benchWrite(b, turns, dedup, true)
			})
		}
	}
}

// BenchmarkWriteSync is BenchmarkWrite's 100-turn dedup case with fsync on:
// one fsync per call, the worst case (the pipeline batches calls, and
// concurrent writers share fsyncs).
func BenchmarkWriteSync(b *testing.B) { benchWrite(b, 100, true, false) }

func benchWrite(b *testing.B, turns int, dedup, noSync bool) {
	dir := b.TempDir()
	s, err := Open(dir, Options{NoSync: noSync, NoDedup: !dedup})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	template := chatEpisode("bench", turns, 500)
	var in int64
	for _, c := range template {
		in += int64(len(c.Request) + len(c.Response))
	}
	b.SetBytes(in / int64(turns))
	b.ReportAllocs()
	n := 0
	start := time.Now()
	for b.Loop() {
		c := *template[n%turns]
		c.EpisodeID = fmt.Sprintf("ep-%d", n/turns)
		c.CallID = fmt.Sprintf("%s-%d", c.EpisodeID, n%turns)
		writeT(b, s, &c)
		n++
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "calls/s")
	b.ReportMetric(float64(segBytes(b, dir))/float64(n), "disk-B/call")
}

// BenchmarkWriteBatch measures writes of 64 calls of 64 episodes, as the
// pipeline sends them when calls queued up behind a write (fsync off).
// Reported per call.
func BenchmarkWriteBatch(b *testing.B) {
	s, err := Open(b.TempDir(), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const turns, batch = 10, 64
	template := chatEpisode("bench", turns, 500)
	b.ReportAllocs()
	n := 0
	calls := make([]*recorder.Call, batch)
	for b.Loop() {
		for i := range calls {
			c := *template[n%turns]
			c.EpisodeID = fmt.Sprintf("ep-%d-%d", n/turns, i)
			c.CallID = fmt.Sprintf("%s-%d", c.EpisodeID, n%turns)
			calls[i] = &c
		}
		writeT(b, s, calls...)
		n++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*batch), "ns/call")
}

// BenchmarkIndexMemory measures the heap the store keeps per stored call:
// the in-memory index (call ids and frame locations) and the dedup
// encoders, which are bounded (Options.MaxEncoders and MaxEncoderBytes),
// after 200,000 small calls in 20,000 episodes of ten. heap-B/call is the
// live heap after a collection, over the calls; the index's share grows
// with every call the store holds, the encoders' does not.
func BenchmarkIndexMemory(b *testing.B) {
	const episodes, perEpisode = 20000, 10
	start := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	req := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	resp := []byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}]}`)
	for b.Loop() {
		s, err := Open(b.TempDir(), Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for e := range episodes {
			batch := make([]*recorder.Call, 0, perEpisode)
			for k := range perEpisode {
				batch = append(batch, &recorder.Call{Schema: recorder.CallSchema, EpisodeID: fmt.Sprintf("ep-%06d", e),
					CallID: fmt.Sprintf("call_%016x%016x", e, k), API: recorder.APIChatCompletions, Method: "POST",
					Path: "/v1/chat/completions", StartedAt: start.Add(time.Duration(e*perEpisode+k) * time.Millisecond),
					Status: 200, Request: req, Response: resp})
			}
			if err := s.WriteCalls(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		dedup := s.DedupStats()
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(episodes*perEpisode), "heap-B/call")
		b.ReportMetric(float64(dedup.Bytes)/(episodes*perEpisode), "dedup-B/call")
		s.Close()
	}
}
