package storetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/recorder"
)

// Epoch is the start time of the first call ChatEpisode returns.
var Epoch = time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)

// ChatEpisode returns turns calls of a chat episode whose history grows by
// about turnBytes per turn: each call resends the system prompt, the tools
// and every earlier message, and its response is the assistant message the
// next call resends. Call i starts at Epoch + i seconds.
func ChatEpisode(ep string, turns, turnBytes int) []*recorder.Call {
	tools := `[{"type":"function","function":{"name":"bash","description":"` + strings.Repeat("Run a shell command. ", 30) + `"}}]`
	msgs := []string{`{"role":"system","content":"` + strings.Repeat("You are a careful coding agent. ", 40) + `"}`}
	calls := make([]*recorder.Call, turns)
	for t := range turns {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":%q}`, prose(ep, t, turnBytes/2)))
		answer := prose(ep, t+1<<20, turnBytes/2)
		started := Epoch.Add(time.Duration(t) * time.Second)
		calls[t] = &recorder.Call{
			Schema: recorder.CallSchema, EpisodeID: ep, CallID: fmt.Sprintf("%s-call-%04d", ep, t),
			API: recorder.APIChatCompletions, Method: "POST", Path: "/v1/chat/completions", Model: "m", Stream: true,
			StartedAt: started, EndedAt: started.Add(time.Second), Status: 200, EndReason: recorder.EndDone,
			Upstream: "http://127.0.0.1:9/v1",
			Request:  json.RawMessage(`{"model":"m","messages":[` + strings.Join(msgs, ",") + `],"tools":` + tools + `,"stream":true}`),
			Response: json.RawMessage(fmt.Sprintf(`{"id":"r%d","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":9}}`, t, answer, 100*t)),
			Usage:    json.RawMessage(fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":9}`, 100*t)),
		}
		msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":%q}`, answer))
	}
	return calls
}

// prose returns n bytes of varied word-like text, so compression sees
// about the redundancy of a real transcript and no more.
func prose(ep string, seed, n int) string {
	words := strings.Fields("the a file func return error test main.go build ok value if err != nil package go run fix line check output diff patch apply read write")
	s := uint64(seed)*2654435761 + uint64(len(ep)) + 1
	var b strings.Builder
	for b.Len() < n {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		fmt.Fprintf(&b, "%s%d ", words[s%uint64(len(words))], s%997)
	}
	return b.String()[:n]
}

// Fixtures returns the captured harness requests of the module's
// testdata/harness-requests (found from the working directory up), one
// episode per file named after it, one call per request that has a body.
// The calls carry token ids and a first-byte time so that every field
// round-trips.
func Fixtures(t testing.TB) map[string][]*recorder.Call {
	t.Helper()
	dir, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "testdata", "harness-requests", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v, %d files", err, len(files))
	}
	out := map[string][]*recorder.Call{}
	for _, name := range files {
		ep := filepath.Base(name)
		out[ep] = fixtureCalls(t, name, ep)
	}
	return out
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

func fixtureCalls(t testing.TB, name, ep string) []*recorder.Call {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	var out []*recorder.Call
	for sc.Scan() {
		var line struct {
			Path string          `json:"path"`
			Body json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(line.Body) == 0 {
			continue
		}
		n := len(out)
		c := ChatEpisode(ep, n+1, 10)[n]
		c.Path, c.Request = line.Path, line.Body
		first := c.StartedAt.Add(150 * time.Millisecond)
		c.FirstByteAt, c.Harness = &first, "fixture/1"
		c.Tokens = &recorder.Tokens{PromptIDs: []int32{1, 2, 3, int32(n)}, CompletionIDs: []int32{int32(n), 7}}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// AssertCalls checks got against want: same ids and episode in order, Seq
// 1..n, byte-identical request, response and usage, and equal metadata
// and token ids.
func AssertCalls(t testing.TB, got, want []*recorder.Call) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d calls, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.CallID != w.CallID || g.Seq != int64(i+1) || g.EpisodeID != w.EpisodeID || !g.StartedAt.Equal(w.StartedAt) {
			t.Fatalf("call %d = %s seq %d ep %s, want %s seq %d ep %s", i, g.CallID, g.Seq, g.EpisodeID, w.CallID, i+1, w.EpisodeID)
		}
		if !bytes.Equal(g.Request, w.Request) || !bytes.Equal(g.Response, w.Response) || !bytes.Equal(g.Usage, w.Usage) {
			t.Fatalf("call %s: bodies differ after round trip", w.CallID)
		}
		if g.Model != w.Model || g.Status != w.Status || g.Path != w.Path || g.Harness != w.Harness || !g.EndedAt.Equal(w.EndedAt) {
			t.Fatalf("call %s: metadata %+v, want %+v", w.CallID, g, w)
		}
		if (g.FirstByteAt == nil) != (w.FirstByteAt == nil) || (w.FirstByteAt != nil && !g.FirstByteAt.Equal(*w.FirstByteAt)) {
			t.Fatalf("call %s: first byte at %v, want %v", w.CallID, g.FirstByteAt, w.FirstByteAt)
		}
		if (g.Tokens == nil) != (w.Tokens == nil) || (w.Tokens != nil && (!slices.Equal(g.Tokens.PromptIDs, w.Tokens.PromptIDs) || !slices.Equal(g.Tokens.CompletionIDs, w.Tokens.CompletionIDs))) {
			t.Fatalf("call %s: tokens %+v, want %+v", w.CallID, g.Tokens, w.Tokens)
		}
	}
}

// ReadEpisodeFile reads a recorded episode file (the format of
// testdata/reconstruct/*.input.jsonl): the episode on the first line, then
// one call per line.
func ReadEpisodeFile(t testing.TB, path string) (recorder.Episode, []*recorder.Call) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	var ep recorder.Episode
	var calls []*recorder.Call
	for i := 0; sc.Scan(); i++ {
		v := any(&ep)
		if i > 0 {
			c := new(recorder.Call)
			calls, v = append(calls, c), c
		}
		if err := json.Unmarshal(sc.Bytes(), v); err != nil {
			t.Fatalf("%s line %d: %v", path, i+1, err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return ep, calls
}
