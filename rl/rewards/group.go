package rewards

import (
	"slices"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/rl"
	"github.com/orchard-rl/orchard/rl/advantage"
	"github.com/orchard-rl/orchard/rl/rules"
)

// scoredEpisode is one episode between rules and advantages.
type scoredEpisode struct {
	id     string
	turns  []rl.Turn
	scored []rules.Scored
	ep     *episodeScore
}

// score turns the facts of every episode into turn scores.
func (s *Scores) score(segs map[string][]segmentFacts) {
	groups := map[string][]*scoredEpisode{}
	ids := make([]string, 0, len(segs))
	for id := range segs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		turns, _ := episodeTurns(segs[id])
		sc := s.opts.Rules.Score(turns, &s.Stats.Ops)
		info := segs[id][0].ep
		es := &episodeScore{status: info.Outcome.Status, outcome: s.outcome(info.Outcome)}
		for _, t := range turns {
			es.order = append(es.order, t.CallID)
		}
		if es.outcome == nil {
			s.Stats.NoOutcome++
		}
		s.eps[id] = es
		g := groupKey(&info)
		groups[g] = append(groups[g], &scoredEpisode{id: id, turns: turns, scored: sc, ep: es})
		s.Stats.Episodes++
		s.Stats.Turns += len(turns)
	}
	for _, g := range groups {
		s.group(g)
	}
}

// outcome is the episode's posted reward, else the status's outcome.
func (s *Scores) outcome(o reconstruct.Outcome) *float64 {
	if o.Reward != nil {
		v := *o.Reward
		return &v
	}
	if v, ok := s.opts.Rules.Outcome[o.Status]; ok && o.Status != "running" {
		return &v
	}
	return nil
}

// groupKey is the group of an episode: its group id, else its task id,
// else itself alone.
func groupKey(t *reconstruct.Trajectory) string {
	switch {
	case t.GroupID != nil:
		return "g\x00" + *t.GroupID
	case t.TaskID != nil:
		return "t\x00" + *t.TaskID
	}
	return "e\x00" + t.EpisodeID
}

// group computes the advantages of one group and stores every turn.
func (s *Scores) group(g []*scoredEpisode) {
	rs := make([]advantage.Rollout, len(g))
	for i, e := range g {
		rs[i].Outcome = e.ep.outcome
		for _, sc := range e.scored {
			rs[i].Process = append(rs[i].Process, sc.Reward)
		}
	}
	res := advantage.Group(rs, s.opts.Advantage)
	for i, e := range g {
		total := 0.0
		for t, tu := range e.turns {
			ts := &turnScore{process: e.scored[t].Reward, hits: e.scored[t].Hits}
			ts.Reward, ts.Return = ptr(res[i].Rewards[t]), ptr(res[i].Returns[t])
			if res[i].Advantages != nil {
				ts.Advantage = ptr(res[i].Advantages[t])
			}
			ts.RuleHits = []reconstruct.RuleHit{}
			for _, h := range ts.hits {
				ts.RuleHits = append(ts.RuleHits, reconstruct.RuleHit{Rule: h.Rule, Delta: h.Delta,
					Evidence: reconstruct.Evidence{MessageIndex: h.Evidence.MessageIndex, Start: h.Evidence.Start, End: h.Evidence.End}})
			}
			s.Stats.Hits += len(ts.hits)
			total += res[i].Rewards[t]
			s.turns[callKey{e.id, tu.CallID}] = ts
		}
		if e.ep.outcome != nil {
			e.ep.total = ptr(total)
		}
	}
}

func ptr(v float64) *float64 { return &v }
