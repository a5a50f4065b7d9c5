package proxy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/internal/loadgen"
	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/embedded"
	"github.com/orchard-rl/orchard/recorder/lineage"
)

// BenchmarkRecordEpisode measures the record path's per-call work after a
// stream ends, on the load benchmark's own calls (plain path: requests
// without token ids, responses assembled from its streams): lineage, and
// the embedded store's write (dedup encoding, zstd, append; no fsync, which
// the disk decides). Each op records 64 episodes of eight calls, turn by
// turn across the episodes as 64 clients would, in writes of 64 calls.
//
// store-tokens is store on the token path: the calls carry the engine's
// token ids and logprobs, and their responses leave out what the proxy
// asked for, as the vLLM kind's records do.
func BenchmarkRecordEpisode(b *testing.B) {
	const episodes = 64
	plain, tokens := loadEpisodeCalls(b, episodes, false), loadEpisodeCalls(b, episodes, true)
	ctx := context.Background()
	run := func(b *testing.B, turns [][]*recorder.Call, observe, write bool) {
		st, err := embedded.Open(b.TempDir(), embedded.Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		tr := lineage.NewTracker(lineage.Options{})
		b.ReportAllocs()
		round := 0
		for b.Loop() {
			for _, calls := range turns {
				batch := make([]*recorder.Call, len(calls))
				for i, tmpl := range calls {
					c := &recorder.Call{}
					*c = *tmpl
					c.EpisodeID = fmt.Sprintf("%s-r%d", tmpl.EpisodeID, round)
					c.CallID = fmt.Sprintf("%s-r%d", tmpl.CallID, round)
					batch[i] = c
					if observe {
						if l, ok := tr.Observe(c); ok {
							c.Lineage = &l
						}
					}
				}
				if write {
					if err := st.WriteCalls(ctx, batch); err != nil {
						b.Fatal(err)
					}
				}
			}
			for e := range episodes {
				tr.Forget(fmt.Sprintf("%s-r%d", turns[0][e].EpisodeID, round))
			}
			round++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*episodes*len(turns))/1e3, "us/call")
	}
	b.Run("lineage", func(b *testing.B) { run(b, plain, true, false) })
	b.Run("store", func(b *testing.B) { run(b, plain, false, true) })
	b.Run("both", func(b *testing.B) { run(b, plain, true, true) })
	b.Run("store-tokens", func(b *testing.B) { run(b, tokens, false, true) })
}

// loadEpisodeCalls returns the load benchmark's calls as the proxy records
// them on the plain path, or with tokens on the vLLM kind's token path,
// turns[k][e] being turn k of episode e. They are templates: copy one
// before handing it to the recorder.
func loadEpisodeCalls(tb testing.TB, episodes int, tokens bool) [][]*recorder.Call {
	var sc loadgen.Scenario
	sc.Defaults()
	bodies, err := sc.Bodies(true, tokens, tokens)
	if err != nil {
		tb.Fatal(err)
	}
	assembled := func(body []byte) assemble.Result {
		if !tokens {
			return assemble.Stream(recorder.APIChatCompletions, body)
		}
		s, _ := assemble.NewStreamer(recorder.APIChatCompletions)
		s.Hide([]assemble.Unseen{{Name: "prompt_token_ids"}, {Name: "token_ids", PerChoice: true}, {Name: "logprobs", PerChoice: true}})
		s.Write(body)
		return s.Result()
	}
	start := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	turns := make([][]*recorder.Call, len(bodies))
	for e := range episodes {
		ep := fmt.Sprintf("bench-w%d-e0", e)
		reqs := sc.Requests(ep, false)
		for k, body := range bodies {
			res := assembled(body)
			at := start.Add(time.Duration(k*episodes+e) * time.Millisecond)
			first, end := at.Add(time.Millisecond), at.Add(20*time.Millisecond)
			turns[k] = append(turns[k], &recorder.Call{
				Schema: recorder.CallSchema, EpisodeID: ep, CallID: fmt.Sprintf("call_%s_%d", ep, k),
				API: recorder.APIChatCompletions, Method: "POST", Path: "/e/" + ep + "/v1/chat/completions",
				Model: loadgen.Model, Stream: true, StartedAt: at, FirstByteAt: &first, EndedAt: end,
				Upstream: "http://127.0.0.1:8000/v1", UpstreamKind: "openai", Harness: "orchard-bench",
				Status: 200, EndReason: recorder.EndDone, Request: reqs[k],
				Response: res.Response, Usage: res.Usage, Tokens: res.Tokens, Checked: true,
			})
		}
	}
	return turns
}
