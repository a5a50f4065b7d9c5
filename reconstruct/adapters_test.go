package reconstruct

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/tidwall/gjson"
)

// jsonType names the JSON type of v as decoded by encoding/json.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// TestAdapterFields checks the top-level field names of each trainer
// format against the names its trainer's loader reads
// (docs/sample-format.md gives the files and versions).
func TestAdapterFields(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		FormatSFT:         {"loss_mask", "messages", "tools"},
		FormatVerl:        {"extra_info", "messages", "tools"},                                // MultiTurnSFTDataset messages_key, tools_key
		FormatVerlPrompts: {"ability", "data_source", "extra_info", "prompt", "reward_model"}, // RLHFDataset prompt_key + reward columns
		FormatVerlAgent:   {"extra_fields", "num_turns", "prompt_ids", "response_ids", "response_logprobs", "response_mask", "reward_score"},
		FormatTRL:         {"assistant_masks", "input_ids"},           // tokenized rows (ids present)
		FormatOpenRLHF:    {"datasource", "input", "output", "tools"}, // --data.input_key input --data.output_key output
		FormatOpenRLHFRL:  {"action_mask", "advantages", "info", "response_length", "rewards", "rollout_log_probs", "sequences", "total_length"},
		FormatSlime:       {"loss_mask", "metadata", "response_length", "reward", "rollout_log_probs", "tokens"},
		FormatTokens:      {"advantages", "input_ids", "logprobs", "loss_mask", "meta", "reward"},
	}
	for format, fields := range want {
		t.Run(format, func(t *testing.T) {
			lines, _ := exportLines(t, readInput(t, goldenDir+"/chat-tools.input.jsonl"), Options{Format: format})
			if len(lines) == 0 {
				t.Fatal("no lines")
			}
			var row map[string]any
			if err := json.Unmarshal(lines[0], &row); err != nil {
				t.Fatal(err)
			}
			var got []string
			for k := range row {
				got = append(got, k)
			}
			slices.Sort(got)
			if !slices.Equal(got, fields) {
				t.Errorf("fields = %v, want %v", got, fields)
			}
		})
	}
	t.Run("trl-prompt-completion", func(t *testing.T) {
		lines, _ := exportLines(t, readInput(t, goldenDir+"/messages-parallel-stream-no-tokens.input.jsonl"), Options{Format: FormatTRL})
		for _, l := range lines {
			if !gjson.GetBytes(l, "prompt").IsArray() || len(gjson.GetBytes(l, "completion").Array()) != 1 || gjson.GetBytes(l, "tools").Type != gjson.String {
				t.Errorf("not a conversational prompt-completion row: %s", l)
			}
		}
	})
}

// TestTrainerMessages checks chat template messages in both tool
// encodings: a role, string content, tool calls whose arguments are JSON
// text (strings) or JSON objects (objects), tool messages linked by id.
func TestTrainerMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ toolsAs, args, tools string }{
		{ToolsAsStrings, "string", "string"}, {ToolsAsObjects, "object", "array"},
	} {
		t.Run(tc.toolsAs, func(t *testing.T) {
			lines, _ := exportLines(t, readInput(t, goldenDir+"/chat-tools.input.jsonl"), Options{Format: FormatSFT, ToolsAs: tc.toolsAs})
			var row map[string]any
			if err := json.Unmarshal(lines[0], &row); err != nil {
				t.Fatal(err)
			}
			if got := jsonType(row["tools"]); got != tc.tools {
				t.Errorf("tools is %s, want %s", got, tc.tools)
			}
			roles := map[string]bool{"system": true, "user": true, "assistant": true, "tool": true}
			calls := 0
			for i, m := range row["messages"].([]any) {
				msg := m.(map[string]any)
				if !roles[msg["role"].(string)] || jsonType(msg["content"]) != "string" {
					t.Errorf("message %d: role %v, content %s", i, msg["role"], jsonType(msg["content"]))
				}
				for _, c := range asSlice(msg["tool_calls"]) {
					fn := c.(map[string]any)["function"].(map[string]any)
					if jsonType(fn["name"]) != "string" || jsonType(fn["arguments"]) != tc.args {
						t.Errorf("message %d: tool call function %v", i, fn)
					}
					calls++
				}
				if msg["role"] == "tool" && jsonType(msg["tool_call_id"]) != "string" {
					t.Errorf("message %d: tool message without tool_call_id", i)
				}
			}
			if calls != 2 {
				t.Errorf("found %d tool calls, want 2", calls)
			}
		})
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
