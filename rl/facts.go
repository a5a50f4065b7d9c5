package rl

import (
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/reconstruct"
)

// Span is bytes [Start, End) of [Text] of message MessageIndex of a
// trajectory's messages.
type Span struct {
	MessageIndex int
	Start, End   int
}

// Turn is the facts of one assistant turn (one call) of a trajectory.
type Turn struct {
	Index        int    // position of the call in its trajectory
	CallID       string // the call's id
	MessageIndex int    // the completion's first message; -1 when it has none
	// Finish is the completion's finish reason when the response shows one
	// ("stop", "length", "tool_calls", ...); "length" covers every API's
	// token-limit stop.
	Finish string
	Text   string // the completion's text content
	Empty  bool   // no text and no tool calls
	Calls  []Call
}

// Call is one tool call of a turn, with the result that answers it.
type Call struct {
	ID, Name, Arguments string
	Args                Span // the arguments in the assistant message's Text
	ValidJSON           bool // the arguments are a JSON object
	Unknown             bool // the request listed tools and this is none of them
	Command             string
	TestCommand         bool     // Command runs a test runner ([IsTestCommand])
	Reads, Lists, Edits []string // paths the call read, listed or edited
	Result              *Result  // nil when no tool result answers the call
}

// Result is a tool result: text the environment produced.
type Result struct {
	MessageIndex int
	Text         string
	ExitCode     *int // nil when the harness shows none
	Exit         Span // the exit code's rendering
	TimedOut     bool
	Timeout      Span
	Tests        *TestRun // nil when no test runner output was found
}

// Failed reports whether the result shows a failure: a non-zero exit
// code, a timeout, or failing tests.
func (r *Result) Failed() bool {
	if r == nil {
		return false
	}
	if r.TimedOut || r.ExitCode != nil && *r.ExitCode != 0 {
		return true
	}
	return r.Tests != nil && r.Tests.Failed > 0
}

// Text returns the text evidence offsets index for m: its content (text
// parts joined with "\n"), then "\n" and the arguments of each tool call.
func Text(m *reconstruct.ChatMessage) string {
	s := contentText(m.Content)
	for _, tc := range m.ToolCalls {
		s += "\n" + tc.Function.Arguments
	}
	return s
}

func contentText(c any) string {
	switch v := c.(type) {
	case string:
		return v
	case []any:
		var parts []string
		for _, p := range v {
			switch q := p.(type) {
			case map[string]string:
				if q["type"] == "text" {
					parts = append(parts, q["text"])
				}
			case map[string]any:
				if s, ok := q["text"].(string); ok && q["type"] == "text" {
					parts = append(parts, s)
				}
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// Facts reads the turns of t. finish maps call ids to finish reasons
// (see [FinishReason]); a missing entry leaves Turn.Finish empty.
func Facts(t *reconstruct.Trajectory, finish map[string]string) []Turn {
	tools := toolNames(t.Tools)
	results := map[string]int{}
	for i, m := range t.Messages {
		if m.Role == "tool" && m.ToolCallID != "" {
			if _, ok := results[m.ToolCallID]; !ok {
				results[m.ToolCallID] = i
			}
		}
	}
	out := make([]Turn, len(t.Turns))
	for j, tt := range t.Turns {
		out[j] = Turn{Index: j, CallID: tt.CallID, MessageIndex: tt.MessageIndex, Finish: finish[tt.CallID], Empty: true}
		if tt.MessageIndex < 0 {
			continue
		}
		turnMessages(t, &out[j], tools, results)
	}
	return out
}

// turnMessages fills tu from the completion's assistant messages.
func turnMessages(t *reconstruct.Trajectory, tu *Turn, tools map[string]bool, results map[string]int) {
	for i := tu.MessageIndex; i < len(t.Messages) && i < len(t.LossMask) && t.LossMask[i] == 1; i++ {
		m := &t.Messages[i]
		if i > tu.MessageIndex && !sameCall(t, i, tu.Index) {
			break
		}
		text := contentText(m.Content)
		tu.Text += text
		off := len(text)
		for _, tc := range m.ToolCalls {
			off++
			c := newCall(tc, Span{MessageIndex: i, Start: off, End: off + len(tc.Function.Arguments)}, tools)
			off += len(tc.Function.Arguments)
			if ri, ok := results[tc.ID]; ok && tc.ID != "" {
				c.Result = newResult(ri, contentText(t.Messages[ri].Content))
			}
			tu.Calls = append(tu.Calls, c)
		}
	}
	tu.Empty = strings.TrimSpace(tu.Text) == "" && len(tu.Calls) == 0
}

// sameCall reports whether message i belongs to turn j (the next turn's
// first message starts another).
func sameCall(t *reconstruct.Trajectory, i, j int) bool {
	return j+1 >= len(t.Turns) || t.Turns[j+1].MessageIndex != i
}

func newCall(tc reconstruct.ChatToolCall, args Span, tools map[string]bool) Call {
	c := Call{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments, Args: args}
	a := strings.TrimSpace(tc.Function.Arguments)
	c.ValidJSON = strings.HasPrefix(a, "{") && json.Valid([]byte(a))
	c.Unknown = len(tools) > 0 && !tools[c.Name]
	if c.ValidJSON {
		actions(&c, gjson.Parse(a))
		c.TestCommand = c.Command != "" && IsTestCommand(c.Command)
	}
	return c
}

// toolNames returns the names of the request's tools (chat shape, or a
// flat name for tools kept as the API sent them).
func toolNames(tools []json.RawMessage) map[string]bool {
	out := map[string]bool{}
	for _, raw := range tools {
		r := gjson.ParseBytes(raw)
		if n := r.Get("function.name").String(); n != "" {
			out[n] = true
		} else if n := r.Get("name").String(); n != "" {
			out[n] = true
		}
	}
	return out
}

// FinishReason reads the finish reason of a recorded response of api
// (a recorder API name): chat and completions finish_reason, Responses
// incomplete_details.reason, Anthropic stop_reason. Token-limit stops of
// every API read "length".
func FinishReason(response []byte) string {
	r := gjson.ParseBytes(response)
	var s string
	for _, p := range []string{"choices.0.finish_reason", "stop_reason", "incomplete_details.reason", "status"} {
		if s = r.Get(p).String(); s != "" {
			break
		}
	}
	switch s {
	case "max_tokens", "max_output_tokens", "model_context_window_exceeded":
		return "length"
	case "end_turn", "completed":
		return "stop"
	case "tool_use":
		return "tool_calls"
	}
	return s
}
