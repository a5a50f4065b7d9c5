package reconstruct

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

var (
	update = flag.Bool("update", false, "rewrite the golden files of testdata/reconstruct")
	regen  = flag.Bool("regen", false, "rewrite the recorded inputs of testdata/reconstruct from the scenarios")
)

const goldenDir = "../testdata/reconstruct"

// scenario records one episode: the input of a golden test.
type scenario struct {
	name    string
	episode recorder.Episode
	play    func() *sim
}

// agentLoop plays turns calls on th: tool calls (n per turn) answered by
// results, the last turn a text answer.
func agentLoop(s *sim, th *simThread, turns, n int) {
	for i := range turns {
		if i == turns-1 {
			s.call(th, s.reply(0, "done"))
			return
		}
		r := s.reply(n, "")
		s.call(th, r)
		s.results(th, r)
	}
}

func scenarios() []scenario {
	ep := func(id, status string) recorder.Episode {
		return recorder.Episode{ID: id, TaskID: "task-1", GroupID: "group-1", Status: status}
	}
	simple := func(api recorder.API, tokens, stream bool, n int) func() *sim {
		return func() *sim {
			s := newSim(api, "ep", 1, tokens)
			s.stream = stream
			th := s.newThread("You are an agent.", "bash")
			s.user(th, "list the files")
			agentLoop(s, th, 3, n)
			return s
		}
	}
	return []scenario{
		{"chat-tools", ep("ep", recorder.StatusSuccess), simple(apiChat, true, false, 1)},
		{"chat-parallel-stream", ep("ep", recorder.StatusSuccess), simple(apiChat, false, true, 2)},
		{"responses-tools-stream", ep("ep", recorder.StatusSuccess), simple(apiResponses, true, true, 1)},
		{"responses-parallel", ep("ep", recorder.StatusSuccess), simple(apiResponses, false, false, 2)},
		{"messages-tools", ep("ep", recorder.StatusSuccess), simple(apiMessages, true, false, 1)},
		{"messages-parallel-stream-no-tokens", ep("ep", recorder.StatusSuccess), simple(apiMessages, false, true, 2)},
		{"completions", ep("ep", recorder.StatusSuccess), simple(apiCompletions, true, false, 1)},
		{"subagent-fork", ep("ep", recorder.StatusSuccess), playFork},
		{"compaction", ep("ep", recorder.StatusSuccess), playCompaction},
		{"retries", ep("ep", recorder.StatusSuccess), playRetries},
		{"failed-episode", ep("ep", recorder.StatusFailure), playFailed},
		{"edited-history", ep("ep", recorder.StatusSuccess), playEdited},
		{"token-drift", ep("ep", recorder.StatusSuccess), playDrift},
		{"qwen-canned", ep("ep", recorder.StatusSuccess), playQwenCanned},
		{"cut-off", ep("ep", recorder.StatusSuccess), playCutOff},
	}
}

// playFork: the main agent calls a subagent (own system prompt and tools)
// and goes on after it.
func playFork() *sim {
	s := newSim(apiChat, "ep", 2, true)
	main := s.newThread("You are the main agent.", "bash", "task")
	s.user(main, "fix the bug")
	r := s.reply(1, "")
	s.call(main, r)
	sub := s.newThread("You are a search subagent.", "grep")
	s.user(sub, "find the bug")
	agentLoop(s, sub, 2, 1)
	s.results(main, r)
	agentLoop(s, main, 2, 1)
	return s
}

// playCompaction: the harness replaces the history by a summary and never
// returns to the old one.
func playCompaction() *sim {
	s := newSim(apiChat, "ep", 3, true)
	th := s.newThread("You are an agent.", "bash")
	s.user(th, "long task")
	agentLoop(s, th, 3, 1)
	s.user(th, "summarize the conversation")
	s.call(th, s.reply(0, "summary: files listed"))
	next := s.newThread("You are an agent.", "bash")
	s.user(next, "previous work: summary: files listed. go on")
	agentLoop(s, next, 2, 1)
	return s
}

// playRetries: an upstream 500 retried with the same prompt, then a
// successful call re-sent (the harness timed out) and replaced.
func playRetries() *sim {
	s := newSim(apiChat, "ep", 4, true)
	th := s.newThread("You are an agent.", "bash")
	s.user(th, "task")
	s.record(th, simReply{}, 500)
	r := s.reply(1, "")
	s.call(th, r)
	s.results(th, r)
	s.record(th, s.reply(1, ""), 200) // first attempt, answer dropped by the harness
	agentLoop(s, th, 2, 1)
	return s
}

// playFailed: the episode failed; its last call was cut by the upstream.
func playFailed() *sim {
	s := newSim(apiMessages, "ep", 5, false)
	th := s.newThread("You are an agent.", "bash")
	s.user(th, "task")
	r := s.reply(1, "")
	s.call(th, r)
	s.results(th, r)
	c := s.call(th, s.reply(0, "partial answ"))
	c.EndReason, c.Error = recorder.EndUpstreamError, "connection reset by peer"
	return s
}

// playEdited: the harness rewrote an earlier tool result.
func playEdited() *sim {
	s := newSim(apiChat, "ep", 6, false)
	th := s.newThread("You are an agent.", "bash")
	s.user(th, "task")
	agentLoop(s, th, 3, 1)
	th.msgs[3] = marshal(map[string]any{"role": "tool", "tool_call_id": "x", "content": "[output elided]"})
	s.user(th, "go on")
	agentLoop(s, th, 1, 0)
	return s
}

// playDrift: the template re-rendered an earlier turn (token ids change
// inside the history), so the token prefix breaks at the fourth call.
func playDrift() *sim {
	s := newSim(apiChat, "ep", 7, true)
	th := s.newThread("You are an agent.", "bash")
	s.user(th, "task")
	for i := range 5 {
		if i == 3 {
			th.ids[2]++ // reasoning stripped from an earlier turn
		}
		r := s.reply(1, "")
		s.call(th, r)
		s.results(th, r)
	}
	return s
}

// playQwenCanned: Qwen Code's first request holds the workspace context
// and an assistant message the harness wrote ("Got it. Thanks for the
// context!"); its tools and tool-call arguments differ in shape.
func playQwenCanned() *sim {
	s := newSim(apiChat, "ep", 8, true)
	th := s.newThread("You are Qwen Code.", "read_file", "run_shell_command")
	s.user(th, "<context>the workspace</context>")
	th.add(map[string]any{"role": "assistant", "content": "Got it. Thanks for the context!"})
	th.pend++
	s.user(th, "read the readme")
	for _, c := range []simToolCall{
		{s.id("call"), "read_file", `{"absolute_path":"/w/README.md","limit":20}`},
		{s.id("call"), "run_shell_command", `{"command":"ls","is_background":false}`},
	} {
		r := simReply{reasoning: "thinking " + c.id, calls: []simToolCall{c}}
		s.call(th, r)
		s.results(th, r)
	}
	s.call(th, s.reply(0, "done"))
	return s
}

// playCutOff: mid-episode, the client goes away during a generation and
// later the upstream resets one; the harness resends the same prompt
// each time.
func playCutOff() *sim {
	s := newSim(apiChat, "ep", 9, true)
	th := s.newThread("You are an agent.", "bash")
	s.user(th, "task")
	r := s.reply(1, "")
	s.call(th, r)
	s.results(th, r)
	c := s.record(th, s.reply(0, ""), 200)
	c.EndReason = recorder.EndClientGone
	c.Response = json.RawMessage(`{"id":"resp","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"I will"},"finish_reason":null}]}`)
	r = s.reply(1, "")
	s.call(th, r)
	s.results(th, r)
	c = s.record(th, s.reply(0, "partial answ"), 200)
	c.EndReason, c.Error = recorder.EndUpstreamError, "connection reset by peer"
	s.call(th, s.reply(0, "done"))
	return s
}

// writeInput records a scenario as JSONL: the episode, then its calls.
func writeInput(t *testing.T, sc scenario) {
	s := sc.play()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	ep := sc.episode
	ep.ID = s.episode
	if err := enc.Encode(ep); err != nil {
		t.Fatal(err)
	}
	for _, c := range s.calls {
		if err := enc.Encode(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(goldenDir, sc.name+".input.jsonl"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readInput reads a recorded episode.
func readInput(t testing.TB, path string) *memSource {
	t.Helper()
	ep, calls := storetest.ReadEpisodeFile(t, path)
	src := newMemSource()
	src.add(ep, calls)
	return src
}

// TestGolden exports every recorded episode of testdata/reconstruct in
// every format and compares the lines with the golden files.
func TestGolden(t *testing.T) {
	if *regen {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, sc := range scenarios() {
			writeInput(t, sc)
		}
	}
	inputs, err := filepath.Glob(filepath.Join(goldenDir, "*.input.jsonl"))
	if err != nil || len(inputs) != len(scenarios()) {
		t.Fatalf("found %d inputs, want %d (run with -regen): %v", len(inputs), len(scenarios()), err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input.jsonl")
		for _, format := range Formats {
			t.Run(name+"/"+format, func(t *testing.T) {
				var buf bytes.Buffer
				if _, err := Export(t.Context(), readInput(t, in), &buf, Options{Format: format, Workers: 3, Check: true}); err != nil {
					t.Fatal(err)
				}
				golden := filepath.Join(goldenDir, name+"."+format+".golden")
				if *update {
					if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update)", err)
				}
				if !bytes.Equal(buf.Bytes(), want) {
					t.Errorf("export differs from %s (run with -update and review the diff)\n got %.2000s", golden, buf.Bytes())
				}
			})
		}
	}
}
