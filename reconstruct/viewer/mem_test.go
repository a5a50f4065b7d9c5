package viewer

import (
	"context"
	"fmt"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/embedded"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

// storeOf returns a store holding n finished episodes (metadata only: the
// list never reads calls without a filter that needs them).
func storeOf(t testing.TB, n int) *embedded.Store {
	t.Helper()
	s := openStore(t)
	ctx := context.Background()
	for i := range n {
		r := float64(i%7) / 7
		ep := recorder.Episode{ID: fmt.Sprintf("ep-%07d", i), TaskID: fmt.Sprintf("task-%03d", i%100), GroupID: fmt.Sprintf("group-%05d", i/8),
			Status: recorder.StatusSuccess, Reward: &r, CreatedAt: storetest.Epoch.Add(time.Duration(i) * time.Second)}
		if i%5 == 0 {
			ep.Status = recorder.StatusFailure
		}
		if err := s.PutEpisode(ctx, &ep); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// firstPageCost returns the mallocs and bytes allocated by one render of
// the list's first page over src.
func firstPageCost(t testing.TB, src Source, query string) (allocs, bytes float64) {
	t.Helper()
	h := New(Options{Source: src})
	run := func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/"+query, nil))
		if w.Code != 200 {
			t.Fatalf("GET /%s = %d: %s", query, w.Code, w.Body)
		}
	}
	run()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 20
	for range runs {
		run()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / runs, float64(after.TotalAlloc-before.TotalAlloc) / runs
}

// TestListMemoryFlat: the first page costs the same allocations in a
// store ten times larger, with and without a filter the store applies
// and one the viewer applies to its window. Every query fills its page
// in both stores, so that only the store's size differs.
func TestListMemoryFlat(t *testing.T) {
	small, large := storeOf(t, 200), storeOf(t, 2000)
	for _, query := range []string{"?limit=20", "?limit=20&status=failure", "?limit=20&reward_min=0.5"} {
		as, bs := firstPageCost(t, small, query)
		al, bl := firstPageCost(t, large, query)
		t.Logf("first page %q: 200 episodes %.0f allocs %.0f B; 2000 episodes %.0f allocs %.0f B", query, as, bs, al, bl)
		if al > as*1.05+10 || bl > bs*1.10+4096 {
			t.Errorf("first page %q: %.0f allocs %.0f B over 2000 episodes, %.0f allocs %.0f B over 200: grows with the store", query, al, bl, as, bs)
		}
	}
}

// BenchmarkListFirstPage measures rendering the list's first page (50
// rows, status counts) server-side as the store grows: time should grow
// only with the store's index scan, allocations not at all.
func BenchmarkListFirstPage(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("episodes=%d", n), func(b *testing.B) {
			h := New(Options{Source: storeOf(b, n)})
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
				if w.Code != 200 {
					b.Fatalf("GET / = %d", w.Code)
				}
			}
		})
	}
}
