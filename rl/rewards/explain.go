package rewards

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/rl"
)

// Explanation is one episode's scoring, turn by turn (`rewards explain
// --json`).
type Explanation struct {
	EpisodeID    string          `json:"episode_id"`
	Status       string          `json:"status"`
	Outcome      *float64        `json:"outcome"`
	Reward       *float64        `json:"reward"`
	RewardConfig string          `json:"reward_config"`
	Turns        []ExplainedTurn `json:"turns"`
}

// ExplainedTurn is one turn of an [Explanation].
type ExplainedTurn struct {
	Segment int    `json:"segment"`
	Turn    int    `json:"turn"`
	CallID  string `json:"call_id"`
	reconstruct.TurnReward
	Evidence []string `json:"evidence"` // the text of each rule hit, cut
}

// Explain scores the episodes ex selects and explains episode id (which
// must be among them, e.g. ex.Episodes = []string{id} with its group).
func Explain(ctx context.Context, src reconstruct.Source, ex reconstruct.Options, o Options, id string) (*Explanation, error) {
	var buf bytes.Buffer
	ex.Format = reconstruct.FormatTrajectories
	if _, s, err := Export(ctx, src, &buf, ex, o); err != nil {
		return nil, err
	} else if ep := s.eps[id]; ep == nil {
		return nil, fmt.Errorf("episode %s: not among the scored episodes", id)
	} else {
		x := &Explanation{EpisodeID: id, Status: ep.status, Outcome: ep.outcome, Reward: ep.total, RewardConfig: s.Config, Turns: []ExplainedTurn{}}
		return x, x.read(&buf)
	}
}

func (x *Explanation) read(r io.Reader) error {
	dec := json.NewDecoder(r)
	for dec.More() {
		var t reconstruct.Trajectory
		if err := dec.Decode(&t); err != nil {
			return fmt.Errorf("read trajectory: %w", err)
		}
		if t.EpisodeID != x.EpisodeID {
			continue
		}
		for i, tt := range t.Turns {
			et := ExplainedTurn{Segment: t.Segment, Turn: i, CallID: tt.CallID, TurnReward: tt.TurnReward, Evidence: []string{}}
			for _, h := range tt.RuleHits {
				et.Evidence = append(et.Evidence, excerpt(&t, h.Evidence))
			}
			x.Turns = append(x.Turns, et)
		}
	}
	return nil
}

// excerpt returns the evidence text, cut to 60 bytes, on one line.
func excerpt(t *reconstruct.Trajectory, e reconstruct.Evidence) string {
	if e.MessageIndex < 0 || e.MessageIndex >= len(t.Messages) {
		return ""
	}
	s := rl.Text(&t.Messages[e.MessageIndex])
	if e.Start < 0 || e.End > len(s) || e.Start > e.End {
		return ""
	}
	s = s[e.Start:e.End]
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return strings.ReplaceAll(s, "\n", `\n`)
}

// WriteText prints the explanation, one line per turn and per rule hit.
func (x *Explanation) WriteText(w io.Writer) {
	fmt.Fprintf(w, "episode %s  status %s  outcome %s  reward %s  config %s\n", x.EpisodeID, x.Status, num(x.Outcome), num(x.Reward), x.RewardConfig)
	for _, t := range x.Turns {
		fmt.Fprintf(w, "turn %d.%d %s  reward %s  return %s  advantage %s\n", t.Segment, t.Turn, t.CallID, num(t.Reward), num(t.Return), num(t.Advantage))
		for i, h := range t.RuleHits {
			fmt.Fprintf(w, "  %-28s %+.3f  msg %d [%d,%d) %q\n", h.Rule, h.Delta, h.Evidence.MessageIndex, h.Evidence.Start, h.Evidence.End, t.Evidence[i])
		}
	}
}

func num(v *float64) string {
	if v == nil {
		return "null"
	}
	return strconv.FormatFloat(*v, 'f', 3, 64)
}
