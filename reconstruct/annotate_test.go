package reconstruct

import (
	"path/filepath"
	"testing"

	"github.com/tidwall/gjson"
)

// fixedAnnotator gives every trajectory reward 0.5 and each generated
// token an advantage of 0.25.
type fixedAnnotator struct{}

func (fixedAnnotator) AnnotateTrajectory(t *Trajectory) error {
	r := 0.5
	t.Reward = &r
	if t.Tokens != nil {
		t.Tokens.Advantages = make([]float64, len(t.Tokens.InputIDs))
		for i, m := range t.Tokens.LossMask {
			if m != 0 {
				t.Tokens.Advantages[i] = 0.25
			}
		}
	}
	return nil
}

func (fixedAnnotator) AnnotateTurn(*Turn) error { return nil }

// TestTokenRowsCarryRewards: token RL rows carry what the Annotator
// filled (the trajectory's reward, per-token advantages over the same
// tokens as the mask), and null without one.
func TestTokenRowsCarryRewards(t *testing.T) {
	t.Parallel()
	in := filepath.Join(goldenDir, "chat-tools.input.jsonl")
	cases := []struct {
		format, reward, adv, mask string
	}{
		{FormatTokens, "reward", "advantages", "loss_mask"},
		{FormatOpenRLHFRL, "rewards", "advantages", "action_mask"},
		{FormatSlime, "reward", "", "loss_mask"},
		{FormatVerlAgent, "reward_score", "", "response_mask"},
	}
	for _, tc := range cases {
		t.Run(tc.format, func(t *testing.T) {
			lines, _ := exportLines(t, readInput(t, in), Options{Format: tc.format, Annotator: fixedAnnotator{}})
			row := gjson.ParseBytes(lines[0])
			if got := row.Get(tc.reward).Float(); got != 0.5 {
				t.Errorf("%s = %v, want 0.5", tc.reward, got)
			}
			if tc.adv != "" {
				adv, mask := row.Get(tc.adv).Array(), row.Get(tc.mask).Array()
				if len(adv) != len(mask) {
					t.Fatalf("%d advantages, %d mask entries", len(adv), len(mask))
				}
				for i := range adv {
					if want := 0.25 * mask[i].Float(); adv[i].Float() != want {
						t.Fatalf("advantage %d = %v, want %v", i, adv[i].Float(), want)
					}
				}
			}
			plain, _ := exportLines(t, readInput(t, in), Options{Format: tc.format})
			if r := gjson.GetBytes(plain[0], tc.reward); r.Type != gjson.Null {
				t.Errorf("%s without an annotator = %s, want null", tc.reward, r.Raw)
			}
		})
	}
}
