package lineage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
// recorded call (vllm-checked: with the calls' JSON known valid, as the
// proxy's are). state-B/episode is the heap the tracker keeps for the
// whole episode, counted-B/episode what it counts of it (Bytes, the
// measure its budget bounds).
func BenchmarkObserve(b *testing.B) {
	for _, bc := range []struct {
		name  string
		calls []*recorder.Call
	}{
		{"tokens", tokenEpisode(300, 14_000)},
		{"messages", chatEpisode(300, false)},
		{"tokens+messages", chatEpisode(300, true)},
		{"vllm", vllmEpisode(300)},
		{"vllm-checked", checked(vllmEpisode(300))},
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
			heap, counted := episodeHeap(bc.calls)
			b.ReportMetric(heap, "state-B/episode")
			b.ReportMetric(counted, "counted-B/episode")
		})
	}
}

// checked marks calls as the proxy does: their JSON is known valid.
func checked(calls []*recorder.Call) []*recorder.Call {
	for _, c := range calls {
		c.Checked = true
	}
	return calls
}

// episodeHeap returns the heap a tracker holds for calls' episode and what
// the tracker counts of it (Bytes, which its budget bounds).
func episodeHeap(calls []*recorder.Call) (float64, float64) {
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
	return float64(after.HeapAlloc) - float64(before.HeapAlloc), float64(tr.Bytes())
}

// vllmEpisode is chatEpisode(turns, true) with responses shaped as vLLM
// returns them: per choice a logprobs object (5 top logprobs per token)
// and the completion's token_ids, and the prompt's ids at the top level.
func vllmEpisode(turns int) []*recorder.Call {
	calls := chatEpisode(turns, true)
	for i, c := range calls {
		lp := make([]map[string]any, len(c.Tokens.CompletionIDs))
		for j := range lp {
			top := make([]map[string]any, 5)
			for k := range top {
				top[k] = map[string]any{"token": fmt.Sprintf("tok%d", k), "logprob": -0.25 * float64(k), "bytes": []int{116, 111, 107}}
			}
			lp[j] = map[string]any{"token": "tok0", "logprob": -0.01, "bytes": []int{116, 111, 107}, "top_logprobs": top}
		}
		call := []map[string]any{{"id": fmt.Sprintf("c%d", i), "type": "function",
			"function": map[string]any{"name": "run", "arguments": fmt.Sprintf(`{"cmd":"step %d"}`, i)}}}
		resp, _ := json.Marshal(map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", i), "object": "chat.completion", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0,
				"message":       map[string]any{"role": "assistant", "content": nil, "tool_calls": call},
				"logprobs":      map[string]any{"content": lp},
				"finish_reason": "tool_calls", "stop_reason": nil,
				"token_ids": c.Tokens.CompletionIDs}},
			"usage":            map[string]any{"prompt_tokens": len(c.Tokens.PromptIDs), "completion_tokens": len(c.Tokens.CompletionIDs)},
			"prompt_token_ids": c.Tokens.PromptIDs,
		})
		c.Response = resp
	}
	return calls
}

// BenchmarkExtract measures the message-level extraction of one call of
// vllmEpisode (request ~56-120 KB, response with logprobs and token ids),
// with jsonscan and, for comparison, with gjson only.
func BenchmarkExtract(b *testing.B) {
	calls := vllmEpisode(300)
	for _, mode := range []struct {
		name      string
		gjsonOnly bool
	}{{"jsonscan", false}, {"gjson", true}} {
		b.Run(mode.name, func(b *testing.B) { benchExtract(b, calls, mode.gjsonOnly, false) })
	}
}

// BenchmarkExtractHarness measures the message-level extraction of the
// real harness requests in testdata/harness-requests (18-64 KB of tool
// schemas with every call), per call, with the memo of their episode
// kept as the tracker keeps it.
func BenchmarkExtractHarness(b *testing.B) {
	files, err := filepath.Glob("../../testdata/harness-requests/*.jsonl")
	if err != nil || len(files) == 0 {
		b.Fatalf("no harness requests: %v", err)
	}
	for _, f := range files {
		var calls []*recorder.Call
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		for line := range bytes.Lines(data) {
			var l struct {
				Path string          `json:"path"`
				Body json.RawMessage `json:"body"`
			}
			if json.Unmarshal(line, &l) != nil || len(l.Body) == 0 {
				continue
			}
			var api recorder.API
			switch {
			case strings.HasSuffix(l.Path, "/chat/completions"):
				api = recorder.APIChatCompletions
			case strings.HasSuffix(l.Path, "/responses"):
				api = recorder.APIResponses
			case strings.HasSuffix(l.Path, "/messages"):
				api = recorder.APIMessages
			default:
				continue
			}
			calls = append(calls, &recorder.Call{API: api, Request: l.Body, Checked: true})
		}
		if len(calls) == 0 {
			continue
		}
		b.Run(strings.TrimSuffix(filepath.Base(f), ".jsonl"), func(b *testing.B) { benchExtract(b, calls, false, true) })
	}
}

// benchExtract extracts calls in turn, with one memo, as an episode's
// tracker does.
func benchExtract(b *testing.B, calls []*recorder.Call, gjsonOnly, checked bool) {
	var in seqInput[uint64]
	x := extractor{in: &in, memo: make(map[uint64]uint64), gjsonOnly: gjsonOnly, checked: checked}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c := calls[i%len(calls)]
		in.reset()
		x.extract(c.API, c.Request, c.Response)
		i++
	}
}
