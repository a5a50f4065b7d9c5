package rules

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/rl"
)

// harness renders turns the way one harness does, learned from its
// recorded request in testdata/harness-requests: the tool names, argument
// keys, and the tool result of its `echo mock-tool-ok` call, into which a
// test substitutes its own command, output and exit code.
type harness struct {
	name             string
	tools            []json.RawMessage
	shell, cmdKey    string
	read, edit, pkey string // "" when the harness has no such tool (Codex: shell and apply_patch)
	result           string // the fixture's result of `echo mock-tool-ok`
	exit             string // the exit code's rendering with code 0, "" when none
	timeout          string // a timeout's rendering, "" when the fixture shows none
}

func loadHarness(t *testing.T, name string) *harness {
	t.Helper()
	b, err := os.ReadFile("../../testdata/harness-requests/" + name + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	body := gjson.Get(lines[len(lines)-1], "body")
	h := &harness{name: name}
	body.Get("tools").ForEach(func(_, v gjson.Result) bool {
		n := v.Get("name").String()
		if n == "" {
			n = v.Get("function.name").String()
		}
		if n != "" {
			h.tools = append(h.tools, json.RawMessage(fmt.Sprintf(`{"type":"function","function":{"name":%q}}`, n)))
		}
		return true
	})
	switch name {
	case "codex":
		h.shell, h.cmdKey = "exec_command", "cmd"
		h.result = body.Get(`input.#(type=="function_call_output").output`).String()
		h.exit = "Process exited with code 0"
	case "opencode":
		h.shell, h.cmdKey, h.read, h.edit, h.pkey = "bash", "command", "read", "edit", "filePath"
		h.result = body.Get(`messages.#(role=="tool").content`).String()
		// opencode's bash tool description in the fixture: "commands will time
		// out after 120000ms"; the result renders as opencode's bash.ts does.
		h.timeout = "\n\n<bash_metadata>\nbash tool terminated command after exceeding timeout 120000 ms\n</bash_metadata>"
	case "qwen-code":
		h.shell, h.cmdKey, h.read, h.edit, h.pkey = "run_shell_command", "command", "read_file", "edit", "file_path"
		h.result = body.Get(`messages.#(role=="tool").content.0.text`).String()
		h.exit = "Exit Code: 0"
	case "claude-code":
		h.shell, h.cmdKey, h.read, h.edit, h.pkey = "Bash", "command", "Read", "Edit", "file_path"
		body.Get("messages").ForEach(func(_, m gjson.Result) bool {
			if r := m.Get(`content.#(type=="tool_result").content`); r.Exists() {
				h.result = r.String()
			}
			return true
		})
	}
	if !strings.Contains(h.result, "mock-tool-ok") || h.exit != "" && !strings.Contains(h.result, h.exit) {
		t.Fatalf("%s: fixture result %q does not hold its rendering", name, h.result)
	}
	return h
}

// step is one turn of a scenario: a shell command with its output and
// exit code, a read or edit of a file, or a text answer.
type step struct {
	cmd, out string
	code     int
	timeout  bool
	read     string
	edit     string
	text     string
	raw      string // raw arguments of a call to tool rawTool
	rawTool  string
	finish   string
}

func sh(cmd, out string, code int) step { return step{cmd: cmd, out: out, code: code} }

// render returns the harness's tool result for a shell step.
func (h *harness) render(s step) string {
	r := strings.Replace(h.result, "echo mock-tool-ok", s.cmd, 1)
	r = strings.Replace(r, "mock-tool-ok", s.out, 1)
	if h.exit != "" {
		r = strings.Replace(r, h.exit, strings.Replace(h.exit, "0", fmt.Sprint(s.code), 1), 1)
	}
	if s.timeout {
		r += h.timeout
	}
	return r
}

// call returns the tool call of a step and its result text.
func (h *harness) call(s step) (string, string, string) {
	args := func(kv ...string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	switch {
	case s.rawTool == "SHELL":
		return h.shell, s.raw, h.render(step{cmd: "ls", out: "src"})
	case s.rawTool != "":
		return s.rawTool, s.raw, "error: no such tool"
	case s.read != "" && h.read != "":
		return h.read, args(h.pkey, s.read), "contents of " + s.read
	case s.read != "":
		return h.shell, args(h.cmdKey, "cat "+s.read), h.render(step{cmd: "cat " + s.read, out: "contents"})
	case s.edit != "" && h.edit != "":
		return h.edit, args(h.pkey, s.edit, "old_string", "a", "new_string", "b"), "edited"
	case s.edit != "":
		patch := "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: " + s.edit + "\n@@\n-a\n+b\n*** End Patch\nEOF"
		return h.shell, args(h.cmdKey, patch), h.render(step{cmd: "apply_patch", out: "Success. Updated the following files:\nM " + s.edit})
	}
	return h.shell, args(h.cmdKey, s.cmd), h.render(s)
}

// trajectory lays a scenario out as the chat view of its episode.
func (h *harness) trajectory(steps []step) *reconstruct.Trajectory {
	t := &reconstruct.Trajectory{Tools: h.tools, Messages: []reconstruct.ChatMessage{{Role: "user", Content: "fix the bug"}}, LossMask: []int8{0}}
	for i, s := range steps {
		t.Turns = append(t.Turns, reconstruct.TrajectoryTurn{MessageIndex: len(t.Messages), CallID: fmt.Sprintf("c%d", i)})
		if s.cmd == "" && s.read == "" && s.edit == "" && s.rawTool == "" {
			t.Messages = append(t.Messages, reconstruct.ChatMessage{Role: "assistant", Content: s.text})
			t.LossMask = append(t.LossMask, 1)
			continue
		}
		name, args, res := h.call(s)
		id := fmt.Sprintf("call_%d", i)
		t.Messages = append(t.Messages,
			reconstruct.ChatMessage{Role: "assistant", Content: s.text, ToolCalls: []reconstruct.ChatToolCall{{ID: id, Type: "function", Function: reconstruct.ChatFunction{Name: name, Arguments: args}}}},
			reconstruct.ChatMessage{Role: "tool", ToolCallID: id, Content: res})
		t.LossMask = append(t.LossMask, 1, 0)
	}
	return t
}

// facts reads a scenario's turns, with finish reasons from the steps.
func (h *harness) facts(steps []step) ([]rl.Turn, *reconstruct.Trajectory) {
	t := h.trajectory(steps)
	finish := map[string]string{}
	for i, s := range steps {
		finish[fmt.Sprintf("c%d", i)] = s.finish
	}
	return rl.Facts(t, finish), t
}
