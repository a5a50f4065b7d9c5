package lineage

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// tokenEpisode is an agent loop over token ids: a system prefix of base
// ids, then per turn a 40-id completion and a 40-id tool result.
func tokenEpisode(turns, base int) []*recorder.Call {
	calls := make([]*recorder.Call, turns)
	p := seq(0, base)
	for i := range calls {
		out := seq(1_000_000+100*i, 40)
		calls[i] = tokCall(fmt.Sprint(i), p, out)
		p = cat(p, out, seq(2_000_000+100*i, 40))
	}
	return calls
}

// chatEpisode is the same loop as chat.completions JSON: a ~56 KB system
// prompt, then an assistant tool call and a ~200-byte tool result per turn.
func chatEpisode(turns int, withTokens bool) []*recorder.Call {
	tok := tokenEpisode(turns, 14_000)
	system := strings.Repeat("You are a careful agent; read before you write. ", 1_150)
	msgs := []map[string]any{{"role": "system", "content": system}, {"role": "user", "content": "go"}}
	calls := make([]*recorder.Call, turns)
	for i := range calls {
		req, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
		call := []map[string]any{{"id": fmt.Sprintf("c%d", i), "type": "function",
			"function": map[string]any{"name": "run", "arguments": fmt.Sprintf(`{"cmd":"step %d"}`, i)}}}
		resp, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0,
			"message": map[string]any{"role": "assistant", "content": nil, "tool_calls": call}}}})
		c := tok[i]
		c.Request, c.RequestRaw, c.Response = req, false, resp
		if !withTokens {
			c.Tokens = nil
		}
		calls[i] = c
		msgs = append(msgs, map[string]any{"role": "assistant", "tool_calls": call},
			map[string]any{"role": "tool", "tool_call_id": fmt.Sprintf("c%d", i), "content": fmt.Sprintf("%0200d", i)})
	}
	return calls
}

// BenchmarkObserve measures the cost per call of classifying a 300-turn
// agent episode whose prompts grow from 14k to 38k tokens (20k on
// average; ~56-120 KB of request JSON), as the proxy would pay it per
// recorded call. state-B/episode is the heap the tracker keeps for the
// whole episode.
func BenchmarkObserve(b *testing.B) {
	for _, bc := range []struct {
		name  string
		calls []*recorder.Call
	}{
		{"tokens", tokenEpisode(300, 14_000)},
		{"messages", chatEpisode(300, false)},
		{"tokens+messages", chatEpisode(300, true)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tr := NewTracker(Options{})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%len(bc.calls) == 0 {
					tr.Forget("ep")
				}
				tr.Observe(bc.calls[i%len(bc.calls)])
				i++
			}
			b.ReportMetric(episodeHeap(bc.calls), "state-B/episode")
		})
	}
}

func episodeHeap(calls []*recorder.Call) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tr := NewTracker(Options{})
	for _, c := range calls {
		tr.Observe(c)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(tr)
	return float64(after.HeapAlloc) - float64(before.HeapAlloc)
}
