package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/orchard-rl/orchard/internal/redistest"
	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

// backend is a Redis the semantic tests run against.
type backend struct {
	name string
	url  string
}

// backends starts a single server and a 3-master cluster for t (or uses
// REDIS_URL / REDIS_CLUSTER_URL).
func backends(t *testing.T) []backend {
	t.Helper()
	return []backend{{"single", redistest.URL(t)}, {"cluster", redistest.ClusterURL(t)}}
}

// testPrefix returns a key prefix of its own, so tests can share a Redis.
func testPrefix() string {
	var b [6]byte
	rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// openT opens a store on url, with a fresh prefix unless opts has one.
func openT(t testing.TB, url string, opts Options) *Store {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = testPrefix()
	}
	s, err := Open(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// twin opens a second store on the same Redis and prefix as s: another
// proxy replica, or the same one after a restart.
func twin(t testing.TB, url string, s *Store) *Store {
	t.Helper()
	o := s.opts
	return openT(t, url, o)
}

// The conformance suite's generators and assertions, under short names.
var (
	epoch       = storetest.Epoch
	chatEpisode = storetest.ChatEpisode
	assertCalls = storetest.AssertCalls
)

func writeT(t testing.TB, s *Store, calls ...*recorder.Call) {
	t.Helper()
	storetest.Write(t, s, calls...)
}

func callsT(t testing.TB, s *Store, ep string) []*recorder.Call {
	t.Helper()
	return storetest.Calls(t, s, ep)
}

// storedBytes returns the payload bytes (sum of string, list element and
// set member lengths) and the MEMORY USAGE of an episode's keys.
func storedBytes(t testing.TB, s *Store, ep string) (payload, memory int64) {
	t.Helper()
	ctx := context.Background()
	ek := s.keys.episode(ep)
	for _, k := range ek.all() {
		if n, err := s.rdb.MemoryUsage(ctx, k, 0).Result(); err == nil {
			memory += n
		}
	}
	frames, err := s.rdb.LRange(ctx, ek.log, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		payload += int64(len(f))
	}
	ids, _ := s.rdb.SMembers(ctx, ek.ids).Result()
	for _, id := range ids {
		payload += int64(len(id))
	}
	h, _ := s.rdb.HGetAll(ctx, ek.ep).Result()
	for k, v := range h {
		payload += int64(len(k) + len(v))
	}
	return payload, memory
}
