package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/internal/redistest"
	"github.com/orchard-rl/orchard/recorder"
)

// BenchmarkWrite measures recording into Redis: encode, dedup, compress,
// and one pipelined script per WriteCalls, one call per batch as the
// pipeline sends a live episode's calls, for short and long episodes with
// dedup on and off, on a local redis-server (so the round trip is a
// loopback one). calls/s is the recording rate, MB/s counts the
// request+response bytes taken in, redis-B/call what each call left in
// Redis (frames, ids and state; from the episodes' payload bytes).
func BenchmarkWrite(b *testing.B) {
	url := redistest.URL(b)
	for _, turns := range []int{10, 100} {
		for _, dedup := range []bool{true, false} {
			b.Run(fmt.Sprintf("turns=%d/dedup=%v", turns, dedup), func(b *testing.B) {
				benchWrite(b, url, turns, dedup)
			})
		}
	}
}

func benchWrite(b *testing.B, url string, turns int, dedup bool) {
	s := openT(b, url, Options{NoDedup: !dedup})
	template := chatEpisode("bench", turns, 500)
	var in int64
	for _, c := range template {
		in += int64(len(c.Request) + len(c.Response))
	}
	ctx := context.Background()
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
	elapsed := time.Since(start).Seconds()
	b.ReportMetric(float64(n)/elapsed, "calls/s")
	b.ReportMetric(float64(n)*float64(in)/float64(turns)/elapsed/1e6, "MB/s")
	var stored int64
	for ep := range (n + turns - 1) / turns {
		p, _ := storedBytes(b, s, fmt.Sprintf("ep-%d", ep))
		stored += p
	}
	b.ReportMetric(float64(stored)/float64(n), "redis-B/call")
	if err := s.rdb.Del(ctx, s.keys.all(), s.keys.entries(), s.keys.filter("status", "running")).Err(); err != nil {
		b.Fatal(err)
	}
	for ep := range (n + turns - 1) / turns {
		s.rdb.Del(ctx, s.keys.episode(fmt.Sprintf("ep-%d", ep)).all()...)
	}
}

// BenchmarkWriteBatch measures what the pipeline's batching buys: each
// WriteCalls carries one call of each of 32 concurrent 100-turn episodes,
// sent as one pipeline of 32 scripts. calls/s counts calls, not batches.
func BenchmarkWriteBatch(b *testing.B) {
	const episodes, turns = 32, 100
	s := openT(b, redistest.URL(b), Options{})
	template := chatEpisode("bench", turns, 500)
	var in int64
	for _, c := range template {
		in += int64(len(c.Request) + len(c.Response))
	}
	b.ReportAllocs()
	n := 0
	start := time.Now()
	for b.Loop() {
		batch := make([]*recorder.Call, episodes)
		for e := range batch {
			c := *template[n%turns]
			c.EpisodeID = fmt.Sprintf("ep-%d-%d", n/turns, e)
			c.CallID = fmt.Sprintf("%s-%d", c.EpisodeID, n%turns)
			batch[e] = &c
		}
		writeT(b, s, batch...)
		n++
	}
	elapsed := time.Since(start).Seconds()
	b.ReportMetric(float64(n*episodes)/elapsed, "calls/s")
	b.ReportMetric(float64(n*episodes)*float64(in)/turns/elapsed/1e6, "MB/s")
}
