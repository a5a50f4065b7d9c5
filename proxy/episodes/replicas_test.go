package episodes_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/orchard-rl/orchard/internal/redistest"
	"github.com/orchard-rl/orchard/proxy/episodes"
	"github.com/orchard-rl/orchard/recorder/redisstore"
)

// notifyFeed is a FinishFeed that also reports, after the Handler has been
// handed them, each finish received and each (re)subscription.
type notifyFeed struct {
	episodes.FinishFeed
	got    chan string
	synced chan struct{}
}

func (f notifyFeed) SubscribeFinished(ctx context.Context, finished func(string), resync func()) error {
	return f.FinishFeed.SubscribeFinished(ctx,
		func(id string) { finished(id); f.got <- id },
		func() {
			resync()
			select {
			case f.synced <- struct{}{}:
			default:
			}
		})
}

// redisReplica is a proxy in secure mode on the Redis at url, with the
// episode API and the finish feed on that Redis.
func redisReplica(t *testing.T, url string) (*env, notifyFeed) {
	t.Helper()
	st, err := redisstore.Open(context.Background(), url, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	feed := notifyFeed{FinishFeed: st, got: make(chan string, 16), synced: make(chan struct{}, 1)}
	e := mounted(t, episodes.Options{Store: st, Finishes: feed}, nil)
	<-feed.synced
	return e, feed
}

// TestReplicasCreateOnce: 16 concurrent creates of one id, split over two
// replicas on one Redis, give exactly one 201 and fifteen 409s.
func TestReplicasCreateOnce(t *testing.T) {
	url := redistest.NewServer(t).URL()
	a, _ := redisReplica(t, url)
	b, _ := redisReplica(t, url)
	admin := map[string]string{"Authorization": "Bearer " + adminToken}
	for round := range 5 {
		body := []byte(fmt.Sprintf(`{"id":"race-%d"}`, round))
		var wg sync.WaitGroup
		codes := make(chan int, 16)
		for i := range 16 {
			e := []*env{a, b}[i%2]
			wg.Go(func() { codes <- do(t, "POST", e.Proxy.URL+"/orchard/v1/episodes", admin, body).Status })
		}
		wg.Wait()
		close(codes)
		count := map[int]int{}
		for c := range codes {
			count[c]++
		}
		if count[http.StatusCreated] != 1 || count[http.StatusConflict] != 15 {
			t.Fatalf("round %d: status counts %v, want one 201 and fifteen 409", round, count)
		}
	}
}

// TestReplicasFinishWhileRedisPaused: an episode finished on replica A has
// its token refused on replica B, which saw it running, while Redis is
// paused and B cannot look it up.
func TestReplicasFinishWhileRedisPaused(t *testing.T) {
	srv := redistest.NewServer(t)
	a, _ := redisReplica(t, srv.URL())
	b, feedB := redisReplica(t, srv.URL())
	ep := createEpisode(t, a, `{"task_id":"t1"}`)
	chat := []byte(`{"model":"text","messages":[{"role":"user","content":"hi"}]}`)
	callB := func() reply {
		return do(t, "POST", b.Proxy.URL+"/e/"+ep.ID+"/v1/chat/completions", map[string]string{"Authorization": "Bearer " + ep.Token}, chat)
	}
	if r := callB(); r.Status != http.StatusOK {
		t.Fatalf("running episode's token on B: %d %s", r.Status, r.Body)
	}
	fin := do(t, "POST", a.Proxy.URL+"/orchard/v1/episodes/"+ep.ID+"/finish",
		map[string]string{"Authorization": "Bearer " + adminToken}, []byte(`{"status":"success","reward":1}`))
	if fin.Status != http.StatusOK {
		t.Fatalf("finish on A: %d %s", fin.Status, fin.Body)
	}
	if got := <-feedB.got; got != ep.ID {
		t.Fatalf("B heard finish of %q, want %q", got, ep.ID)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	if r := callB(); r.Status != http.StatusUnauthorized {
		t.Fatalf("finished episode's token on B with Redis paused: %d %s, want 401", r.Status, r.Body)
	}
}
