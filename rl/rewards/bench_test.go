package rewards

import (
	"fmt"
	"testing"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/rl"
	"github.com/orchard-rl/orchard/rl/rules"
)

// syntheticSegs returns n episodes (groups of 10) of turns turns each: a
// coding loop of reads, edits and test runs, so that most rules evaluate
// their full condition.
func syntheticSegs(n, turns int) map[string][]segmentFacts {
	steps := []string{"python -m pytest -q", "cat src/a.py", "sed -i 's/a/b/' src/a.py", "ls src"}
	msgs := []reconstruct.ChatMessage{{Role: "user", Content: "fix"}}
	tr := &reconstruct.Trajectory{Messages: msgs, LossMask: []int8{0}}
	for k := range turns {
		id := fmt.Sprintf("call_%d", k)
		tr.Turns = append(tr.Turns, reconstruct.TrajectoryTurn{MessageIndex: len(tr.Messages), CallID: fmt.Sprintf("c%d", k), Seq: int64(k)})
		out := [2]string{red2, green}[k%2]
		tr.Messages = append(tr.Messages,
			reconstruct.ChatMessage{Role: "assistant", ToolCalls: []reconstruct.ChatToolCall{{ID: id, Function: reconstruct.ChatFunction{Name: "bash", Arguments: bash(steps[k%len(steps)])}}}},
			reconstruct.ChatMessage{Role: "tool", ToolCallID: id, Content: out})
		tr.LossMask = append(tr.LossMask, 1, 0)
	}
	facts := rl.Facts(tr, nil)
	segs := map[string][]segmentFacts{}
	for i := range n {
		g, id := fmt.Sprintf("g%d", i/10), fmt.Sprintf("ep%d", i)
		seq := make([]int64, turns)
		for k := range seq {
			seq[k] = int64(k)
		}
		status := [2]string{"success", "failure"}[i%2]
		segs[id] = []segmentFacts{{turns: facts, seq: seq, ep: reconstruct.Trajectory{EpisodeID: id, GroupID: &g, Outcome: reconstruct.Outcome{Status: status}}}}
	}
	return segs
}

func scoreSegs(segs map[string][]segmentFacts) *Scores {
	o := defaultOpts
	o.Rules = rules.Default()
	s := &Scores{turns: map[callKey]*turnScore{}, eps: map[string]*episodeScore{}, opts: o}
	s.score(segs)
	return s
}

// BenchmarkScore measures rules, returns and advantages (the work of
// --rewards beyond reconstruction) for 1k episodes of 50 turns in groups
// of 10; docs/rl.md quotes it.
func BenchmarkScore(b *testing.B) {
	for _, size := range []struct{ eps, turns int }{{1000, 50}, {100, 50}} {
		segs := syntheticSegs(size.eps, size.turns)
		b.Run(fmt.Sprintf("episodes=%d/turns=%d", size.eps, size.turns), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				scoreSegs(segs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(size.eps*size.turns)/1e3, "us/turn")
		})
	}
}

// TestScoreLinear: the rule evaluations grow linearly with the number of
// turns (work counted, not timed).
func TestScoreLinear(t *testing.T) {
	ops := func(turns int) int { return scoreSegs(syntheticSegs(20, turns)).Stats.Ops }
	small, big := ops(25), ops(200)
	if r := float64(big) / float64(small); r > 8.5 || r < 7.5 {
		t.Errorf("work for 200 turns / 25 turns = %d / %d = %.2f, want about 8 (linear)", big, small, r)
	}
}
