package rewards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/recorder"
)

// chatEpisode records an agent loop on the chat API: each step is a tool
// call (name, arguments) with its output, the last a text answer.
func chatEpisode(t *testing.T, id, status string, steps [][3]string, answer string) (recorder.Episode, []*recorder.Call) {
	t.Helper()
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash", "parameters": map[string]any{"type": "object"}}}}
	msgs := []any{map[string]any{"role": "user", "content": "fix the failing tests"}}
	var calls []*recorder.Call
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	call := func(k int, msg map[string]any, finish string) {
		req, _ := json.Marshal(map[string]any{"model": "m", "tools": tools, "messages": msgs})
		resp, _ := json.Marshal(map[string]any{"object": "chat.completion", "choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}})
		calls = append(calls, &recorder.Call{Schema: "orchard.call/v1", EpisodeID: id, Seq: int64(k + 1), CallID: fmt.Sprintf("c%d", k), API: recorder.APIChatCompletions,
			Method: "POST", Path: "/v1/chat/completions", Model: "m", StartedAt: at, EndedAt: at, Status: 200, EndReason: recorder.EndDone, Request: req, Response: resp})
		msgs = append(msgs, msg)
	}
	for k, s := range steps {
		cid := fmt.Sprintf("call_%d", k)
		call(k, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": cid, "type": "function",
			"function": map[string]any{"name": s[0], "arguments": s[1]}}}}, "tool_calls")
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": cid, "content": s[2]})
	}
	call(len(steps), map[string]any{"role": "assistant", "content": answer}, "stop")
	return recorder.Episode{ID: id, TaskID: "calc", Status: status}, calls
}

const (
	red2  = "FF\nFAILED tests/test_calc.py::test_add - assert 1 == 5\nFAILED tests/test_calc.py::test_sub - assert 5 == 1\n==== 2 failed in 0.05s ===="
	green = "..\n==== 2 passed in 0.04s ===="
)

func bash(cmd string) string { b, _ := json.Marshal(map[string]string{"cmd": cmd}); return string(b) }

// TestGoldenCASFT: a failed episode whose fix turn (4) makes both tests
// pass, followed by an edit that breaks them again and a submit while red.
// The sample is cut at the fix; the unknown-tool turn stays in the
// context with loss mask 0.
func TestGoldenCASFT(t *testing.T) {
	const pytest = "python -m pytest -q"
	src := newMemSource()
	src.add(chatEpisode(t, "ep-regress", recorder.StatusFailure, [][3]string{
		{"bash", bash(pytest), red2},
		{"browse", `{"url":"https://docs.python.org"}`, "error: no such tool"},
		{"bash", bash("cat src/calc.py"), "def add(a, b):\n    return a - b\n"},
		{"bash", bash("sed -i 's/a - b/a + b/' src/calc.py"), ""},
		{"bash", bash(pytest), green},
		{"bash", bash("sed -i 's/a + b/a * b/' src/calc.py"), ""},
		{"bash", bash(pytest), red2},
	}, "Done."))
	var buf bytes.Buffer
	st, s, err := Export(t.Context(), src, &buf, reconstruct.Options{Format: FormatCASFT, Workers: 2}, defaultOpts)
	if err != nil {
		t.Fatal(err)
	}
	if st.Samples != 1 || s.Stats.Turns != 8 {
		t.Fatalf("%d samples of %d turns, want 1 of 8:\n%s", st.Samples, s.Stats.Turns, buf.Bytes())
	}
	checkGolden(t, "../../testdata/rl/ca-sft-regression.golden", buf.Bytes())

	var none bytes.Buffer
	src2 := newMemSource()
	src2.add(chatEpisode(t, "ep-flat", recorder.StatusFailure, [][3]string{{"bash", bash(pytest), red2}}, "Done."))
	if st, _, err := Export(t.Context(), src2, &none, reconstruct.Options{Format: FormatCASFT}, defaultOpts); err != nil || st.Samples != 0 {
		t.Errorf("an unresolved episode without a peak: %d samples (%v), want 0:\n%s", st.Samples, err, none.Bytes())
	}
}
