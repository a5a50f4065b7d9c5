package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/recorder"
)

var epoch = time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)

// chatEpisode returns turns calls of a chat episode whose history grows by
// about turnBytes per turn: each call resends the system prompt, the tools
// and every earlier message, and its response is the assistant message the
// next call resends.
func chatEpisode(ep string, turns, turnBytes int) []*recorder.Call {
	tools := `[{"type":"function","function":{"name":"bash","description":"` + strings.Repeat("Run a shell command. ", 30) + `"}}]`
	msgs := []string{`{"role":"system","content":"` + strings.Repeat("You are a careful coding agent. ", 40) + `"}`}
	calls := make([]*recorder.Call, turns)
	for t := range turns {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":%q}`, prose(ep, t, turnBytes/2)))
		answer := prose(ep, t+1<<20, turnBytes/2)
		started := epoch.Add(time.Duration(t) * time.Second)
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

func openT(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func writeT(t testing.TB, s *Store, calls ...*recorder.Call) {
	t.Helper()
	if err := s.WriteCalls(context.Background(), calls); err != nil {
		t.Fatalf("WriteCalls: %v", err)
	}
}

func callsT(t testing.TB, s *Store, ep string) []*recorder.Call {
	t.Helper()
	got, err := s.Calls(context.Background(), ep)
	if err != nil {
		t.Fatalf("Calls(%s): %v", ep, err)
	}
	return got
}

// assertCalls checks got against want: same ids in order, Seq 1..n and
// byte-identical request, response and usage.
func assertCalls(t testing.TB, got, want []*recorder.Call) {
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
	}
}

// segBytes is the on-disk size of the log.
func segBytes(t testing.TB, dir string) int64 {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range m {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}
