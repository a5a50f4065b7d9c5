package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/proxy/proxytest"
)

// The workspace of the rewards end-to-end test: a calculator with a bug
// and a make target whose output is go test's.
const (
	calcSh   = "add() { echo $(( $1 - $2 )); }\n"
	makefile = "test:\n\t@. ./calc.sh; if [ \"$$(add 2 3)\" = 5 ]; then echo '--- PASS: TestAdd (0.00s)'; echo 'ok calc 0.01s'; " +
		"else echo '--- FAIL: TestAdd (0.00s)'; echo 'FAIL calc 0.01s'; exit 1; fi\n"
)

// shellTurn is a scripted turn that calls the bash tool with cmd.
func shellTurn(prompt []int64, id int64, cmd string) llmtest.Turn {
	args, _ := json.Marshal(map[string]string{"cmd": cmd})
	return llmtest.Turn{PromptTokenIDs: prompt, Choice: llmtest.Choice{
		ToolCalls: []llmtest.ToolCall{{ID: "call_" + string(rune('a'+id)), Name: "bash", Arguments: llmtest.Pieces{string(args)}}},
		TokenIDs:  []int64{100 + id}}}
}

// script chains the turns' prompt ids: each prompt extends the previous
// prompt, its completion and one id for the tool result.
func script(cmds []string, answer string) *llmtest.Script {
	var s llmtest.Script
	prompt := []int64{1, 2, 3}
	for k, c := range cmds {
		s.Turns = append(s.Turns, shellTurn(prompt, int64(k), c))
		prompt = append(append(append([]int64(nil), prompt...), 100+int64(k)), 200+int64(k))
	}
	s.Turns = append(s.Turns, llmtest.Turn{PromptTokenIDs: prompt, Choice: llmtest.Choice{Content: llmtest.Pieces{answer}, TokenIDs: []int64{99}}})
	return &s
}

// agentLoop plays one episode through the proxy: it sends the history,
// runs each bash call for real in dir, and appends the output as the
// tool result, until the model answers.
func agentLoop(t *testing.T, base, token, model, dir string) {
	t.Helper()
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}}}}
	msgs := []any{map[string]any{"role": "user", "content": "make the tests pass"}}
	for range 10 {
		r := proxytest.Do(t, "POST", base, map[string]string{"Authorization": "Bearer " + token},
			mustMarshal(t, map[string]any{"model": model, "messages": msgs, "tools": tools}))
		if r.Status != 200 {
			t.Fatalf("%s: status %d: %s", model, r.Status, r.Body)
		}
		m := gjson.GetBytes(r.Body, "choices.0.message")
		msgs = append(msgs, json.RawMessage(m.Raw))
		calls := m.Get("tool_calls").Array()
		if len(calls) == 0 {
			return
		}
		cmd := exec.Command("bash", "-c", gjson.Get(calls[0].Get("function.arguments").String(), "cmd").String())
		cmd.Dir = dir
		out, _ := cmd.CombinedOutput() // a failing command is a result like any other
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": calls[0].Get("id").String(), "content": string(out)})
	}
	t.Fatalf("%s: no answer after 10 turns", model)
}

// TestRewardsEndToEnd: two rollouts of one task go through `orchard
// proxy` with tool results from commands that really run: one reproduces
// the failing test, reads and fixes the file and re-runs the test; the
// other gives up while the test is red. Both are finished through the
// episode API, and `orchard export --rewards --check` must give the exact
// per-turn rewards, rule ids, evidence offsets and advantages.
func TestRewardsEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	scripts := map[string]*llmtest.Script{
		"fixer":   script([]string{"make -s test", "cat calc.sh", "sed -i 's/- \\$2/+ $2/' calc.sh", "make -s test"}, "Fixed."),
		"quitter": script([]string{"make -s test"}, "Done."),
	}
	up := llmtest.NewServer(llmtest.Options{Scripts: scripts})
	defer up.Close()
	data := t.TempDir()
	cfg := &proxyConfig{Listen: "127.0.0.1:0", Upstream: up.URL() + "/v1", UpstreamKind: "vllm", Data: data, IdleTimeout: time.Minute,
		MaxBody: 1 << 20, AdminToken: "admin-e2e", TokenTTL: time.Hour}
	ctx, stop := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- runProxy(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	addr := "http://" + <-ready
	admin := map[string]string{"Authorization": "Bearer admin-e2e"}
	for _, ep := range []struct{ id, model, status string }{{"ep-fix", "fixer", "success"}, {"ep-quit", "quitter", "failure"}} {
		dir := t.TempDir()
		for name, body := range map[string]string{"calc.sh": calcSh, "Makefile": makefile} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r := proxytest.Do(t, "POST", addr+"/orchard/v1/episodes", admin, mustMarshal(t, map[string]any{"id": ep.id, "task_id": "calc", "group_id": "g1"}))
		if r.Status != 201 && r.Status != 200 {
			t.Fatalf("create %s: %d %s", ep.id, r.Status, r.Body)
		}
		agentLoop(t, addr+"/e/"+ep.id+"/v1/chat/completions", gjson.GetBytes(r.Body, "token").String(), ep.model, dir)
		if r := proxytest.Do(t, "POST", addr+"/orchard/v1/episodes/"+ep.id+"/finish", admin, mustMarshal(t, map[string]any{"status": ep.status})); r.Status != 200 {
			t.Fatalf("finish %s: %d %s", ep.id, r.Status, r.Body)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "traj.jsonl")
	if msg, err := runCLI(t, "export", "--data", data, "--rewards", "--check", "--out", out); err != nil {
		t.Fatalf("export --rewards --check: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		got[gjson.Get(line, "episode_id").String()] = gjson.Get(line, `{reward,"rewards":turns.#.reward,"returns":turns.#.return,"advantages":turns.#.advantage,"hits":turns.#.rule_hits}`).Raw
	}
	// ep-fix: turn 3's re-run after the fix passes: repro-fixed 0.2, test-delta
	// 0.2 (1 failing -> 0), regression-run 0.1, clipped to 0.3; all three
	// point at "ok calc 0.01s" in message 8. Outcomes 1 and -1: RLOO gives
	// +-2, the process term 0.1 * (P - P_other) per turn.
	want := map[string]string{
		"ep-fix": `{"reward":1.3,"rewards":[0,0,0,0.3,1],"returns":[1.3,1.3,1.3,1.3,1],"advantages":[2.05,2.05,2.03,2.03,2],"hits":[[],[],[],` +
			`[{"rule":"repro-fixed","delta":0.2,"evidence":{"message_index":8,"start":26,"end":39}},` +
			`{"rule":"test-delta","delta":0.2,"evidence":{"message_index":8,"start":26,"end":39}},` +
			`{"rule":"regression-run","delta":0.1,"evidence":{"message_index":8,"start":26,"end":39}}],[]]}`,
		"ep-quit": `{"reward":-1.2,"rewards":[0,-1.2],"returns":[-1.2,-1.2],"advantages":[-2.05,-2.05],"hits":[[],` +
			`[{"rule":"submit-while-red","delta":-0.2,"evidence":{"message_index":2,"start":26,"end":41}}]]}`,
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s:\n got %s\nwant %s", id, got[id], w)
		}
	}
	msg, err := runCLI(t, "rewards", "explain", "--data", data, "ep-quit")
	if err != nil || !strings.Contains(msg, `submit-while-red             -0.200  msg 2 [26,41) "FAIL calc 0.01s"`) {
		t.Errorf("rewards explain: %v\n%s", err, msg)
	}
}
