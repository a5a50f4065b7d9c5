package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/internal/loadgen"
	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/embedded"
)

// BenchmarkProxy measures one agent-shaped streamed chat call (the default
// scenario: 2-8 KB prompts, 50-500 events, turns cycling) through each
// proxy, in process and over loopback sockets, with 8 concurrent clients.
// Its ns/op and allocations are the whole call (client, proxy and upstream);
// run it with -cpuprofile and focus on package proxy to see what the
// recording proxy adds to the bare one:
//
//	go test -run '^$' -bench Proxy/orchard -cpuprofile cpu.out ./cmd/orchard-bench
//	go tool pprof -top -focus 'orchard/proxy|orchard/recorder' cpu.out
func BenchmarkProxy(b *testing.B) {
	var sc loadgen.Scenario
	sc.Defaults()
	up, err := loadgen.NewUpstream(sc)
	if err != nil {
		b.Fatal(err)
	}
	us := httptest.NewServer(up)
	defer us.Close()
	u, _ := url.Parse(us.URL)
	for _, tc := range proxyCases {
		b.Run(tc.name, func(b *testing.B) {
			var h http.Handler
			switch {
			case tc.bare:
				h = loadgen.NewBareProxy(u)
			case tc.kind != "":
				ph, stop := orchardHandler(b, u, tc.kind, tc.store)
				defer stop()
				h = ph
			}
			base := us.URL
			if h != nil {
				ps := httptest.NewServer(h)
				defer ps.Close()
				base = ps.URL
			}
			benchCalls(b, sc, base, tc.ids)
		})
	}
}

// proxyCases are the in-process targets of the benchmarks.
var proxyCases = []struct {
	name  string
	store bool   // record into the embedded store (else discard)
	kind  string // upstream kind; "" no proxy
	bare  bool
	ids   bool // the client asks for token ids and logprobs itself
}{
	{name: "direct"},
	{name: "bare", bare: true},
	{name: "bare-ids", bare: true, ids: true},
	{name: "orchard-discard", kind: "openai"},
	{name: "orchard-embedded", kind: "openai", store: true},
	{name: "orchard-vllm-embedded", kind: "vllm", store: true},
}

// BenchmarkProxyStreams256 runs 256 concurrent streams through each proxy
// in process and reports the peak heap in use (sampled every 100ms) next to
// the allocations per call: the in-process view of the
// "peak RSS at 256 concurrent streams" target. The heap also holds the upstream's and
// the clients' buffers; compare a proxy with bare, not with 64 MB.
func BenchmarkProxyStreams256(b *testing.B) {
	var sc loadgen.Scenario
	sc.Defaults()
	up, err := loadgen.NewUpstream(sc)
	if err != nil {
		b.Fatal(err)
	}
	us := httptest.NewServer(up)
	defer us.Close()
	u, _ := url.Parse(us.URL)
	for _, tc := range proxyCases[1:] {
		b.Run(tc.name, func(b *testing.B) {
			var h http.Handler = loadgen.NewBareProxy(u)
			if !tc.bare {
				ph, stop := orchardHandler(b, u, tc.kind, tc.store)
				defer stop()
				h = ph
			}
			ps := httptest.NewServer(h)
			defer ps.Close()
			newClient := loadgen.NewClient
			if tc.ids {
				newClient = loadgen.NewIDsClient
			}
			c, err := newClient(ps.URL, sc, 512)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			done := make(chan struct{})
			peak := make(chan uint64)
			go samplePeakHeap(done, peak)
			b.SetParallelism(256 / runtime.GOMAXPROCS(0))
			benchCallsNoSetup(b, sc, c)
			close(done)
			b.ReportMetric(float64(<-peak)/(1<<20), "peak-heap-MB")
		})
	}
}

// samplePeakHeap sends the largest HeapInuse seen until done is closed.
func samplePeakHeap(done <-chan struct{}, peak chan<- uint64) {
	var max uint64
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > max {
			max = ms.HeapInuse
		}
		select {
		case <-done:
			peak <- max
			return
		case <-t.C:
		}
	}
}

// orchardHandler returns an in-process orchard proxy and a func that drains
// and stops it.
func orchardHandler(b *testing.B, u *url.URL, kind string, store bool) (http.Handler, func()) {
	b.Helper()
	base := *u
	base.Path = "/v1"
	opts := proxy.Options{Upstream: &proxy.Upstream{BaseURL: &base, Kind: proxy.UpstreamKind(kind)}}
	var pipe *recorder.Pipeline
	var st *embedded.Store
	if store {
		var err error
		if st, err = embedded.Open(b.TempDir(), embedded.Options{}); err != nil {
			b.Fatal(err)
		}
		pipe = recorder.NewPipeline(st, recorder.PipelineOptions{SpillDir: b.TempDir()})
		opts.Sink = pipe
	}
	h := proxy.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	if err := h.Start(ctx); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	if pipe != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = pipe.Start(ctx)
		}()
	}
	return h, func() {
		h.Close()
		cancel()
		wg.Wait()
		if st != nil {
			st.Close()
		}
	}
}

// benchCalls runs b.N calls against base from 8 goroutines (on 2 CPUs), each playing
// episodes turn by turn.
func benchCalls(b *testing.B, sc loadgen.Scenario, base string, ids bool) {
	b.Helper()
	newClient := loadgen.NewClient
	if ids {
		newClient = loadgen.NewIDsClient
	}
	c, err := newClient(base, sc, 64)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.SetParallelism(4)
	benchCallsNoSetup(b, sc, c)
}

// benchCallsNoSetup runs b.N calls with c from GOMAXPROCS x the benchmark's
// parallelism goroutines.
func benchCallsNoSetup(b *testing.B, sc loadgen.Scenario, c *loadgen.Client) {
	var worker atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := int(worker.Add(1))
		var buf loadgen.Buffers
		for i := 0; pb.Next(); i++ {
			ep := "bench-" + strconv.Itoa(w) + "-" + strconv.Itoa(i/sc.Turns)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			res := c.Do(ctx, &buf, ep, i%sc.Turns, time.Now())
			cancel()
			if res.Outcome != loadgen.OK {
				b.Errorf("call %d: %v: %s", i, res.Outcome, res.Err)
				return
			}
		}
	})
}
