package reconstruct

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/orchard-rl/orchard/recorder"
)

// Schema versions of the exported records (docs/sample-format.md).
const (
	TurnSchema       = "orchard.turn/v1"
	TrajectorySchema = "orchard.trajectory/v1"
)

// Outcome is how the episode and the sample's last call ended.
type Outcome struct {
	Status     string   `json:"status"`      // episode status: running|success|failure|error|timeout
	Reward     *float64 `json:"reward"`      // episode reward, null when none was posted
	EndReason  string   `json:"end_reason"`  // end_reason of the last call
	HTTPStatus int      `json:"http_status"` // HTTP status of the last call
}

// Trajectory is one orchard.trajectory/v1 line: one segment of an episode.
type Trajectory struct {
	Schema    string            `json:"schema"`
	EpisodeID string            `json:"episode_id"`
	TaskID    *string           `json:"task_id"`
	GroupID   *string           `json:"group_id"`
	Segment   int               `json:"segment"`
	API       string            `json:"api"`
	Model     string            `json:"model"`
	Messages  []ChatMessage     `json:"messages"`
	Tools     []json.RawMessage `json:"tools"`
	LossMask  []int8            `json:"loss_mask"`
	Turns     []TrajectoryTurn  `json:"turns"`
	Tokens    *TokenTrajectory  `json:"tokens"`
	Reward    *float64          `json:"reward"` // filled by a rewards Annotator; null without one
	Outcome   Outcome           `json:"outcome"`
	Lineage   SegmentLineage    `json:"lineage"`
	// RewardConfig identifies the rules and parameters that scored the
	// sample (a hash); empty when it was not scored.
	RewardConfig string `json:"reward_config,omitempty"`
}

// TrajectoryTurn is one call of a segment: where its completion is in
// Messages, and what it cost.
type TrajectoryTurn struct {
	MessageIndex int             `json:"message_index"`
	CallID       string          `json:"call_id"`
	Seq          int64           `json:"seq"`
	Usage        json.RawMessage `json:"usage"`
	EndReason    string          `json:"end_reason"`
	TurnReward
}

// TurnReward is the dense reward of one turn, filled by a rewards
// [Annotator]; every field is null without one.
type TurnReward struct {
	Reward    *float64  `json:"reward"`    // the turn's dense reward
	Return    *float64  `json:"return"`    // discounted return-to-go from this turn
	Advantage *float64  `json:"advantage"` // the turn's advantage within its group
	RuleHits  []RuleHit `json:"rule_hits"` // the rules that fired on the turn, in order
}

// RuleHit is one reward rule that fired on a turn, with the text that
// fired it.
type RuleHit struct {
	Rule     string   `json:"rule"`
	Delta    float64  `json:"delta"`
	Evidence Evidence `json:"evidence"`
}

// Evidence points at the text that fired a rule: bytes [Start, End) of
// the content of message MessageIndex of the sample's messages.
type Evidence struct {
	MessageIndex int `json:"message_index"`
	Start        int `json:"start"`
	End          int `json:"end"`
}

// SegmentLineage is how a segment relates to the rest of its episode.
type SegmentLineage struct {
	Kind          string   `json:"kind"`           // root|fork|compacted|edited|retry|drift
	ParentSegment *int     `json:"parent_segment"` // null for a root
	Calls         []string `json:"calls"`          // call ids of the segment, in order
	Retried       []string `json:"retried"`        // superseded attempts, replaced by a later retry
	Drift         *Drift   `json:"drift"`          // the token break that split or flagged it
}

// Turn is one orchard.turn/v1 line: one model call.
type Turn struct {
	Schema     string            `json:"schema"`
	EpisodeID  string            `json:"episode_id"`
	TaskID     *string           `json:"task_id"`
	GroupID    *string           `json:"group_id"`
	CallID     string            `json:"call_id"`
	Seq        int64             `json:"seq"`
	Turn       int               `json:"turn"`    // index within its segment; -1 when in none
	Segment    *int              `json:"segment"` // null when the call is in no trajectory
	API        string            `json:"api"`
	Model      string            `json:"model"`
	Prompt     []ChatMessage     `json:"prompt"`
	Tools      []json.RawMessage `json:"tools"`
	Completion *ChatMessage      `json:"completion"` // null when the call produced none
	Tokens     *TurnTokens       `json:"tokens"`
	Usage      json.RawMessage   `json:"usage"`
	TurnReward
	Outcome      TurnOutcome `json:"outcome"`
	Lineage      TurnLineage `json:"lineage"`
	RewardConfig string      `json:"reward_config,omitempty"` // as Trajectory.RewardConfig
}

// TurnTokens are one call's own token ids and rollout logprobs.
type TurnTokens struct {
	PromptIDs     []int32   `json:"prompt_ids"`
	CompletionIDs []int32   `json:"completion_ids"`
	Logprobs      []float32 `json:"logprobs"`
}

// TurnOutcome is how the call and its episode ended.
type TurnOutcome struct {
	EpisodeStatus string   `json:"episode_status"`
	EpisodeReward *float64 `json:"episode_reward"`
	HTTPStatus    int      `json:"http_status"`
	EndReason     string   `json:"end_reason"`
	Error         string   `json:"error,omitempty"`
	Unusable      string   `json:"unusable,omitempty"` // why no sample uses this call
}

// TurnLineage is how the call relates to earlier calls.
type TurnLineage struct {
	Kind         string `json:"kind"`
	ParentCallID string `json:"parent_call_id,omitempty"`
	RetriedBy    string `json:"retried_by,omitempty"`
}

// episode is one episode being reconstructed.
type episode struct {
	info  recorder.EpisodeSummary
	index int64 // position in the export, for rows that carry an index
	calls []*callState
	segs  []*segment
}

func strOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// trajectory builds the sample of segment s.
func (e *episode) trajectory(s *segment) (*Trajectory, error) {
	last := e.calls[s.calls[len(s.calls)-1]]
	conv, err := DecodeRequest(last.call.API, last.call.Request)
	if err != nil {
		return nil, err
	}
	var msgs []viewMsg
	if last.call.API == apiCompletions {
		msgs = e.completionsView(s)
	} else if msgs, err = e.messagesView(s, conv); err != nil {
		return nil, err
	}
	view, owners := chatView(last.call.API, msgs)
	t := &Trajectory{
		Schema: TrajectorySchema, EpisodeID: e.info.ID, TaskID: strOrNil(e.info.TaskID), GroupID: strOrNil(e.info.GroupID),
		Segment: s.id, API: last.call.API, Model: last.call.Model, Messages: view, LossMask: make([]int8, len(view)),
		Outcome: Outcome{Status: e.info.Status, Reward: e.info.Reward, EndReason: last.call.EndReason, HTTPStatus: last.call.Status},
		Lineage: e.segmentLineage(s), Tools: chatTools(conv.API, conv.Tools),
	}
	first := make([]int, len(s.calls)) // first message of each call's completion
	for j := range first {
		first[j] = -1
	}
	for i, o := range owners {
		if o >= 0 {
			t.LossMask[i] = 1
			if first[o] < 0 {
				first[o] = i
			}
		}
	}
	for j, ci := range s.calls {
		c := e.calls[ci].call
		idx := first[j]
		t.Turns = append(t.Turns, TrajectoryTurn{MessageIndex: idx, CallID: c.CallID, Seq: c.Seq, Usage: c.Usage, EndReason: c.EndReason})
	}
	if hasTokens(e.calls, s) {
		t.Tokens = tokenTrajectory(e.calls, s)
	}
	return t, nil
}

// messagesView lays out segment s as canonical messages: the last call's
// prompt, with each earlier call's completion put back in its place as the
// policy generated it, then the last completion.
func (e *episode) messagesView(s *segment, conv *Conversation) ([]viewMsg, error) {
	last := e.calls[s.calls[len(s.calls)-1]]
	canon := make([]*Message, 0, len(conv.Messages)+1)
	if conv.System != nil {
		canon = append(canon, conv.System)
	}
	for i := range conv.Messages {
		canon = append(canon, &conv.Messages[i])
	}
	if len(canon) != len(last.els.raw) {
		return nil, fmt.Errorf("call %s: %d messages decoded, %d found", last.call.CallID, len(canon), len(last.els.raw))
	}
	var out []viewMsg
	pos := 0
	for j, ci := range s.calls[:len(s.calls)-1] {
		c := e.calls[ci]
		start, end := c.slotStart, c.slotEnd
		if end < 0 {
			for end = start; end < len(canon) && canon[end].Role == "assistant"; end++ {
			}
		}
		if start < pos || end > len(canon) {
			continue // the slot is not in this prompt: nothing of this call is masked in
		}
		for _, m := range canon[pos:start] {
			out = append(out, viewMsg{msg: m, call: -1})
		}
		for k := range c.comp {
			out = append(out, viewMsg{msg: &c.comp[k], call: j})
		}
		pos = end
	}
	for _, m := range canon[pos:] {
		out = append(out, viewMsg{msg: m, call: -1})
	}
	for k := range last.comp {
		out = append(out, viewMsg{msg: &last.comp[k], call: len(s.calls) - 1})
	}
	return out, nil
}

// completionsView lays out a completions segment as alternating text
// spans: what the harness wrote (user) and what the policy generated
// (assistant). When the prompts are not text continuations, only the
// last call is laid out.
func (e *episode) completionsView(s *segment) []viewMsg {
	text := func(role, s string) *Message {
		return &Message{Role: role, Form: FormString, Parts: []Part{{Kind: KindText, Text: s}}}
	}
	var out []viewMsg
	done := 0
	for j, ci := range s.calls {
		c := e.calls[ci]
		p, ok := completionsPrompt(c)
		if !ok || len(p) < done || j > 0 && !strings.HasPrefix(p, viewText(out)) {
			out, done = nil, 0
			if !ok {
				out = append(out, viewMsg{msg: &Message{Role: "user", Parts: []Part{{Kind: KindOther, Raw: c.els.raw[0]}}}, call: -1})
			} else {
				out = append(out, viewMsg{msg: text("user", p), call: -1})
			}
		} else if p[done:] != "" {
			out = append(out, viewMsg{msg: text("user", p[done:]), call: -1})
		}
		out = append(out, viewMsg{msg: text("assistant", completionText(c)), call: j})
		done = len(p) + len(completionText(c))
	}
	return out
}

// viewText concatenates the text of laid out spans.
func viewText(v []viewMsg) string {
	var b strings.Builder
	for _, m := range v {
		for _, p := range m.msg.Parts {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func (e *episode) segmentLineage(s *segment) SegmentLineage {
	l := SegmentLineage{Kind: s.kind, Drift: s.drift, Calls: make([]string, len(s.calls)), Retried: []string{}}
	if s.parent != nil {
		id := s.parent.id
		l.ParentSegment = &id
	}
	for i, ci := range s.calls {
		l.Calls[i] = e.calls[ci].call.CallID
	}
	for _, ci := range s.retried {
		l.Retried = append(l.Retried, e.calls[ci].call.CallID)
	}
	return l
}
