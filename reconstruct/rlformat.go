package reconstruct

// Token-level RL rows. Each is a segment's token trajectory split where
// the policy first generated: the prompt is every token before the first
// masked-in token, the response every token from it on (tool results and
// harness text inside the response are masked out). Field names are each
// trainer's (docs/sample-format.md gives files and versions).

// TokenMeta identifies the episode and segment a token row came from.
type TokenMeta struct {
	EpisodeID string  `json:"episode_id" parquet:"episode_id"`
	Segment   int64   `json:"segment" parquet:"segment"`
	TaskID    *string `json:"task_id" parquet:"task_id,optional"`
	GroupID   *string `json:"group_id" parquet:"group_id,optional"`
}

// SlimeSample is one `slime` row: the fields of slime.utils.types.Sample.
// LossMask and RolloutLogProbs cover the response tokens only.
type SlimeSample struct {
	Tokens          []int32   `json:"tokens" parquet:"tokens,list"`
	ResponseLength  int64     `json:"response_length" parquet:"response_length"`
	LossMask        []int32   `json:"loss_mask" parquet:"loss_mask,list"`
	RolloutLogProbs []float32 `json:"rollout_log_probs" parquet:"rollout_log_probs,list"`
	Reward          *float64  `json:"reward" parquet:"reward,optional"`
	Metadata        TokenMeta `json:"metadata" parquet:"metadata"`
}

// VerlAgentSample is one `verl-agent` row: the fields of verl's
// AgentLoopOutput.
type VerlAgentSample struct {
	PromptIDs        []int32   `json:"prompt_ids" parquet:"prompt_ids,list"`
	ResponseIDs      []int32   `json:"response_ids" parquet:"response_ids,list"`
	ResponseMask     []int32   `json:"response_mask" parquet:"response_mask,list"`
	ResponseLogprobs []float32 `json:"response_logprobs" parquet:"response_logprobs,list"`
	RewardScore      *float64  `json:"reward_score" parquet:"reward_score,optional"`
	NumTurns         int64     `json:"num_turns" parquet:"num_turns"`
	ExtraFields      TokenMeta `json:"extra_fields" parquet:"extra_fields"`
}

// OpenRLHFRLSample is one `openrlhf-rl` row: one sample of OpenRLHF's
// Experience batch. ActionMask, RolloutLogProbs and Advantages cover the
// response (action) tokens; Advantages is null until a rewards Annotator
// fills it.
type OpenRLHFRLSample struct {
	Sequences       []int32   `json:"sequences" parquet:"sequences,list"`
	ActionMask      []int32   `json:"action_mask" parquet:"action_mask,list"`
	RolloutLogProbs []float32 `json:"rollout_log_probs" parquet:"rollout_log_probs,list"`
	Advantages      []float64 `json:"advantages" parquet:"advantages,list,optional"`
	Rewards         *float64  `json:"rewards" parquet:"rewards,optional"`
	ResponseLength  int64     `json:"response_length" parquet:"response_length"`
	TotalLength     int64     `json:"total_length" parquet:"total_length"`
	Info            TokenMeta `json:"info" parquet:"info"`
}

// TokensSample is one `tokens` row: the whole sequence with a loss mask,
// rollout logprobs and per-token advantages (null until a rewards
// Annotator fills them), as Prime-RL or TRL-style trainers map directly.
type TokensSample struct {
	InputIDs   []int32   `json:"input_ids" parquet:"input_ids,list"`
	LossMask   []int32   `json:"loss_mask" parquet:"loss_mask,list"`
	Logprobs   []float32 `json:"logprobs" parquet:"logprobs,list"`
	Advantages []float64 `json:"advantages" parquet:"advantages,list,optional"`
	Reward     *float64  `json:"reward" parquet:"reward,optional"`
	Meta       TokenMeta `json:"meta" parquet:"meta"`
}

// tokenRows converts a trajectory to a token format's row.
func tokenRows(format string, t *Trajectory) ([]sample, string) {
	tk := t.Tokens
	if tk == nil {
		return nil, DropNoTokenIDs
	}
	p := len(tk.LossMask)
	for i, m := range tk.LossMask {
		if m != 0 {
			p = i
			break
		}
	}
	if p == len(tk.LossMask) {
		return nil, DropNoTrainableTurn
	}
	meta := TokenMeta{EpisodeID: t.EpisodeID, Segment: int64(t.Segment), TaskID: t.TaskID, GroupID: t.GroupID}
	var adv []float64
	if len(tk.Advantages) == len(tk.InputIDs) {
		adv = tk.Advantages
	}
	mask, n := widen(tk.LossMask), int64(len(tk.InputIDs))
	var v any
	switch format {
	case FormatSlime:
		v = SlimeSample{Tokens: tk.InputIDs, ResponseLength: n - int64(p), LossMask: mask[p:], RolloutLogProbs: tk.Logprobs[p:],
			Reward: sampleReward(t), Metadata: meta}
	case FormatVerlAgent:
		v = VerlAgentSample{PromptIDs: tk.InputIDs[:p], ResponseIDs: tk.InputIDs[p:], ResponseMask: mask[p:],
			ResponseLogprobs: tk.Logprobs[p:], RewardScore: sampleReward(t), NumTurns: int64(len(t.Messages)), ExtraFields: meta}
	case FormatOpenRLHFRL:
		v = OpenRLHFRLSample{Sequences: tk.InputIDs, ActionMask: mask[p:], RolloutLogProbs: tk.Logprobs[p:], Advantages: tail(adv, p),
			Rewards: sampleReward(t), ResponseLength: n - int64(p), TotalLength: n, Info: meta}
	default:
		v = TokensSample{InputIDs: tk.InputIDs, LossMask: mask, Logprobs: tk.Logprobs, Advantages: adv, Reward: sampleReward(t), Meta: meta}
	}
	return []sample{{value: v, ids: true}}, ""
}

func tail(s []float64, from int) []float64 {
	if s == nil {
		return nil
	}
	return s[from:]
}
