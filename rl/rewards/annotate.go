package rewards

import "github.com/orchard-rl/orchard/reconstruct"

// AnnotateTurn fills a turn sample's reward fields; a call no trajectory
// holds keeps them null.
func (s *Scores) AnnotateTurn(t *reconstruct.Turn) error {
	t.RewardConfig = s.Config
	if ts, ok := s.turns[callKey{t.EpisodeID, t.CallID}]; ok {
		t.TurnReward = ts.TurnReward
	}
	return nil
}

// AnnotateTrajectory fills a trajectory's reward fields: each turn's, the
// episode's total reward, and per-token advantages when it has tokens.
func (s *Scores) AnnotateTrajectory(t *reconstruct.Trajectory) error {
	t.RewardConfig = s.Config
	if ep, ok := s.eps[t.EpisodeID]; ok {
		t.Reward = ep.total
	}
	for i := range t.Turns {
		if ts, ok := s.turns[callKey{t.EpisodeID, t.Turns[i].CallID}]; ok {
			t.Turns[i].TurnReward = ts.TurnReward
		}
	}
	if t.Tokens != nil {
		t.Tokens.Advantages = s.tokenAdvantages(t)
	}
	return nil
}

// tokenAdvantages gives each generated token its turn's advantage, and
// every other token 0.
func (s *Scores) tokenAdvantages(t *reconstruct.Trajectory) []float64 {
	adv := make([]float64, len(t.Tokens.InputIDs))
	for _, tt := range t.Turns {
		k := callKey{t.EpisodeID, tt.CallID}
		span, ok := s.tokens[k]
		ts := s.turns[k]
		if !ok || ts == nil || ts.Advantage == nil {
			continue
		}
		for p := span[0]; p < span[0]+span[1] && p < len(adv); p++ {
			if t.Tokens.LossMask[p] == 1 {
				adv[p] = *ts.Advantage
			}
		}
	}
	return adv
}
