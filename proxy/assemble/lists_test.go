package assemble_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
)

// tokenStream is a vLLM chat stream of n chunks whose texts, ids and
// logprobs all depend on seed.
func tokenStream(seed, n int) []byte {
	var b strings.Builder
	b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":[1,2,3]}` + "\n\n")
	for i := range n {
		fmt.Fprintf(&b, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"s%dt%d "},"logprobs":{"content":[{"token":"s%dt%d ","logprob":-%d.5,"bytes":[115],"top_logprobs":[]}]},"finish_reason":null,"token_ids":[%d]}]}`+"\n\n",
			seed, i, seed, i, seed+i, 1000*seed+i)
	}
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

// snapshot is everything a Result holds, as JSON.
func snapshot(t *testing.T, r assemble.Result) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestListsRecycled: a stream's ids, logprobs and texts grow in buffers
// that earlier streams gave back when their responses were assembled, and
// an earlier stream's Result does not change when a later stream grows its
// lists in them, however long either is (longer ones than the buffers kept
// included). Result answers the same when called again.
func TestListsRecycled(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	type done struct {
		res  assemble.Result
		want string
	}
	var results []done
	for seed := 1; seed <= 40; seed++ {
		n := 1 + r.IntN(300)
		if seed%10 == 0 {
			n = 3000 // past the largest buffer kept
		}
		s, err := assemble.NewStreamer(recorder.APIChatCompletions)
		if err != nil {
			t.Fatal(err)
		}
		s.Write(tokenStream(seed, n))
		res := s.Result()
		if res.Tokens == nil || len(res.Tokens.CompletionIDs) != n || len(res.Tokens.Logprobs) != n {
			t.Fatalf("stream %d: %d chunks assembled to %+v", seed, n, res.Tokens)
		}
		want := snapshot(t, res)
		if again := snapshot(t, s.Result()); again != want {
			t.Fatalf("stream %d: a second Result differs:\n%s\n%s", seed, again, want)
		}
		if !strings.Contains(want, fmt.Sprintf(`s%dt%d `, seed, n-1)) || res.Tokens.CompletionIDs[n-1] != int32(1000*seed+n-1) {
			t.Fatalf("stream %d: the last chunk is missing: %s", seed, want)
		}
		results = append(results, done{res, want})
	}
	for i, d := range results {
		if got := snapshot(t, d.res); got != d.want {
			t.Fatalf("stream %d's result changed after later streams:\n%s\nwas\n%s", i+1, got, d.want)
		}
	}
}
