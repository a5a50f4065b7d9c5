package reconstruct

import (
	"encoding/json"
	"strings"
)

// Trainer adapters. Field names are the ones each library's multi-turn
// dataset reads (docs/sample-format.md gives versions and sources):
//
//   - verl MultiTurnSFTDataset: `messages` (data.multiturn.messages_key)
//     and `tools` (data.multiturn.tools_key); `extra_info` is verl's usual
//     column for per-row metadata.
//   - TRL SFTTrainer: conversational `messages` with a `tools` column; a
//     row that carries `input_ids` is taken as already tokenized, with
//     `assistant_masks` marking the tokens to train on.
//   - OpenRLHF SFTDataset with --multiturn --apply_chat_template: the whole
//     trajectory as a message list under the input key (default `input`);
//     `datasource` is the column its prompt dataset reads.
//
// Messages follow the Hugging Face chat template convention: tool call
// arguments are JSON objects, developer prompts are system prompts, and
// only role, content, reasoning_content, tool_calls and tool_call_id are
// kept.

// TrainerMessage is a message as chat templates read it.
type TrainerMessage struct {
	Role             string            `json:"role"`
	Content          any               `json:"content"`
	ReasoningContent string            `json:"reasoning_content,omitempty"`
	ToolCalls        []TrainerToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string            `json:"tool_call_id,omitempty"`
}

// TrainerToolCall is a tool call whose arguments are a JSON object when
// the model generated one (a string otherwise).
type TrainerToolCall struct {
	ID       string          `json:"id,omitempty"`
	Type     string          `json:"type"`
	Function TrainerFunction `json:"function"`
}

// TrainerFunction is the called function of a [TrainerToolCall].
type TrainerFunction struct {
	Name      string `json:"name"`
	Arguments any    `json:"arguments"`
}

// SFTSample is one `sft` line.
type SFTSample struct {
	Messages []TrainerMessage  `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
}

// VerlSample is one `verl` line.
type VerlSample struct {
	Messages  []TrainerMessage  `json:"messages"`
	Tools     []json.RawMessage `json:"tools"`
	ExtraInfo VerlExtraInfo     `json:"extra_info"`
}

// VerlExtraInfo identifies the sample's origin.
type VerlExtraInfo struct {
	EpisodeID string   `json:"episode_id"`
	Segment   int      `json:"segment"`
	TaskID    *string  `json:"task_id"`
	GroupID   *string  `json:"group_id"`
	Reward    *float64 `json:"reward"`
}

// TRLSample is one `trl` line. InputIDs and AssistantMasks are present
// only for segments with token ids.
type TRLSample struct {
	Messages       []TrainerMessage  `json:"messages"`
	Tools          []json.RawMessage `json:"tools"`
	InputIDs       []int64           `json:"input_ids,omitempty"`
	AssistantMasks []int8            `json:"assistant_masks,omitempty"`
}

// OpenRLHFSample is one `openrlhf` line.
type OpenRLHFSample struct {
	Input      []TrainerMessage `json:"input"`
	Datasource string           `json:"datasource"`
}

// adapt converts a trajectory to the line of format.
func adapt(format string, t *Trajectory) any {
	switch format {
	case FormatSFT:
		return SFTSample{Messages: trainerMessages(t.Messages), Tools: t.Tools}
	case FormatVerl:
		return VerlSample{Messages: trainerMessages(t.Messages), Tools: t.Tools, ExtraInfo: VerlExtraInfo{
			EpisodeID: t.EpisodeID, Segment: t.Segment, TaskID: t.TaskID, GroupID: t.GroupID, Reward: t.Outcome.Reward}}
	case FormatTRL:
		s := TRLSample{Messages: trainerMessages(t.Messages), Tools: t.Tools}
		if t.Tokens != nil {
			s.InputIDs, s.AssistantMasks = t.Tokens.InputIDs, t.Tokens.LossMask
		}
		return s
	case FormatOpenRLHF:
		return OpenRLHFSample{Input: trainerMessages(t.Messages), Datasource: "orchard"}
	}
	return t
}

func trainerMessages(in []ChatMessage) []TrainerMessage {
	out := make([]TrainerMessage, len(in))
	for i, m := range in {
		tm := TrainerMessage{Role: m.Role, Content: m.Content, ReasoningContent: m.ReasoningContent, ToolCallID: m.ToolCallID}
		if tm.Role == "developer" {
			tm.Role = "system"
		}
		for _, tc := range m.ToolCalls {
			tm.ToolCalls = append(tm.ToolCalls, TrainerToolCall{ID: tc.ID, Type: tc.Type,
				Function: TrainerFunction{Name: tc.Function.Name, Arguments: argumentsValue(tc.Function.Arguments)}})
		}
		out[i] = tm
	}
	return out
}

// argumentsValue returns a JSON object's text as an object, and anything
// else as the string it is.
func argumentsValue(args string) any {
	s := strings.TrimSpace(args)
	if strings.HasPrefix(s, "{") && json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	return args
}
