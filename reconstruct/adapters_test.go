package reconstruct

import (
	"encoding/json"
	"fmt"
	"testing"
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

// TestAdapterFields checks the field names and JSON types of the trainer
// formats against what each library's dataset reads (docs/sample-format.md):
// verl MultiTurnSFTDataset (messages, tools), TRL SFTTrainer (messages,
// tools; input_ids + assistant_masks when tokenized), OpenRLHF SFTDataset
// --multiturn (input, datasource).
func TestAdapterFields(t *testing.T) {
	t.Parallel()
	want := map[string]map[string]string{
		FormatSFT:      {"messages": "array", "tools": "array"},
		FormatVerl:     {"messages": "array", "tools": "array", "extra_info": "object"},
		FormatTRL:      {"messages": "array", "tools": "array", "input_ids": "array", "assistant_masks": "array"},
		FormatOpenRLHF: {"input": "array", "datasource": "string"},
	}
	msgsKey := map[string]string{FormatSFT: "messages", FormatVerl: "messages", FormatTRL: "messages", FormatOpenRLHF: "input"}
	for format, fields := range want {
		t.Run(format, func(t *testing.T) {
			lines, _ := exportLines(t, readInput(t, goldenDir+"/chat-tools.input.jsonl"), Options{Format: format})
			if len(lines) != 1 {
				t.Fatalf("got %d lines, want 1", len(lines))
			}
			var row map[string]any
			if err := json.Unmarshal(lines[0], &row); err != nil {
				t.Fatal(err)
			}
			if len(row) != len(fields) {
				t.Errorf("row has %d fields, want %d: %v", len(row), len(fields), row)
			}
			for k, typ := range fields {
				if got := jsonType(row[k]); got != typ {
					t.Errorf("%s is %s, want %s", k, got, typ)
				}
			}
			checkTrainerMessages(t, row[msgsKey[format]].([]any))
			if format == FormatTRL && len(row["input_ids"].([]any)) != len(row["assistant_masks"].([]any)) {
				t.Error("input_ids and assistant_masks differ in length")
			}
		})
	}
}

// checkTrainerMessages checks chat template messages: a role, string
// content, tool calls with object arguments, tool messages linked by id.
func checkTrainerMessages(t *testing.T, msgs []any) {
	t.Helper()
	roles := map[string]bool{"system": true, "user": true, "assistant": true, "tool": true}
	calls := 0
	for i, m := range msgs {
		msg := m.(map[string]any)
		if !roles[msg["role"].(string)] || jsonType(msg["content"]) != "string" {
			t.Errorf("message %d: role %v, content %s", i, msg["role"], jsonType(msg["content"]))
		}
		for _, tc := range asSlice(msg["tool_calls"]) {
			fn := tc.(map[string]any)["function"].(map[string]any)
			if jsonType(fn["name"]) != "string" || jsonType(fn["arguments"]) != "object" {
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
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
