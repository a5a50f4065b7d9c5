package recorder

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fixtureEpisodes reads testdata/harness-requests/*.jsonl (real requests
// captured from four harnesses) and returns, per file, the calls built from
// the lines that have a body.
func fixtureEpisodes(t testing.TB) map[string][]*Call {
	t.Helper()
	files, err := filepath.Glob("../testdata/harness-requests/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v (%d files)", err, len(files))
	}
	out := map[string][]*Call{}
	for _, name := range files {
		ep := filepath.Base(name)
		out[ep] = readFixture(t, name, ep)
	}
	return out
}

func readFixture(t testing.TB, name, ep string) []*Call {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	var calls []*Call
	for sc.Scan() {
		var line struct {
			Method string          `json:"method"`
			Path   string          `json:"path"`
			Body   json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(line.Body) == 0 {
			continue
		}
		n := len(calls) + 1
		c := testCall(ep, fmt.Sprintf("%s-%03d", ep, n), n)
		c.Method, c.Path = line.Method, line.Path
		c.Request = line.Body
		calls = append(calls, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return calls
}

var testEpoch = time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)

// testCall returns a complete call with a small response, usage (with
// whitespace, to check it is kept byte for byte) and token ids.
func testCall(ep, id string, n int) *Call {
	started := testEpoch.Add(time.Duration(n) * time.Second)
	first := started.Add(150 * time.Millisecond)
	return &Call{
		Schema: CallSchema, EpisodeID: ep, Seq: int64(n), CallID: id,
		API: APIChatCompletions, Method: "POST", Path: "/v1/chat/completions", Model: "m",
		Stream: true, StartedAt: started, FirstByteAt: &first, EndedAt: started.Add(time.Second),
		Status: 200, EndReason: EndDone, Upstream: "http://127.0.0.1:1/v1", Harness: "test/1",
		Request:  json.RawMessage(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`),
		Response: json.RawMessage(fmt.Sprintf(`{"id":"r%d","choices":[{"index":0,"message":{"role":"assistant","content":"answer %d"},"finish_reason":"stop"}]}`, n, n)),
		Usage:    json.RawMessage(`{ "prompt_tokens": 10,  "completion_tokens": 2 }`),
		Tokens:   &Tokens{PromptIDs: []int32{1, 2, 3}, CompletionIDs: []int32{int32(n), 7}, Logprobs: []float32{-0.5, -0.25}},
		Lineage:  &Lineage{Kind: LineageExtend, Thread: 0},
	}
}
