package rewards

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/rl"
	"github.com/orchard-rl/orchard/rl/advantage"
	"github.com/orchard-rl/orchard/rl/rules"
)

// Options configures [Score].
type Options struct {
	Rules     *rules.Config // nil means rules.Default()
	Advantage advantage.Options
}

// Stats counts what was scored.
type Stats struct {
	Episodes, Turns, Hits int
	NoOutcome             int // episodes without an outcome (not finished, or a status without one)
	Ops                   int // rule evaluations, for tests of linear growth
}

// Scores are the rewards of every turn of the scored episodes. They are
// read-only after [Score] and safe for concurrent use.
type Scores struct {
	Config string // reward_config: hash of the rules and parameters
	Stats  Stats
	turns  map[callKey]*turnScore
	eps    map[string]*episodeScore
	tokens map[callKey][2]int // completion token offset and count
	opts   Options
}

type callKey struct{ episode, call string }

type turnScore struct {
	reconstruct.TurnReward
	process float64
	hits    []rules.Hit
}

type episodeScore struct {
	outcome *float64
	total   *float64
	status  string
	order   []string // call ids in episode order
}

// segmentFacts is one trajectory's facts, kept for scoring.
type segmentFacts struct {
	ep      reconstruct.Trajectory // without messages
	turns   []rl.Turn
	seq     []int64
	segment int
}

// Score reads the episodes ex selects (its Format, Check and Annotator
// are ignored) and scores them.
func Score(ctx context.Context, src reconstruct.Source, ex reconstruct.Options, o Options) (*Scores, error) {
	if o.Rules == nil {
		o.Rules = rules.Default()
	}
	if err := o.Advantage.Validate(); err != nil {
		return nil, err
	}
	tap := &tapSource{Source: src, finish: map[callKey]string{}, tokens: map[callKey][2]int{}}
	col := &collector{tap: tap, segs: map[string][]segmentFacts{}}
	ex.Format, ex.Check, ex.Annotator, ex.Progress = reconstruct.FormatTrajectories, false, col, nil
	if _, err := reconstruct.Export(ctx, tap, io.Discard, ex); err != nil {
		return nil, fmt.Errorf("read episodes: %w", err)
	}
	s := &Scores{Config: configHash(o), turns: map[callKey]*turnScore{}, eps: map[string]*episodeScore{}, tokens: tap.tokens, opts: o}
	s.score(col.segs)
	return s, nil
}

// configHash names the rules and parameters that scored a sample.
func configHash(o Options) string {
	b, _ := json.Marshal(struct {
		Rules     *rules.Config
		Advantage advantage.Options
	}{o.Rules, o.Advantage})
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:8])
}

// tapSource keeps what scoring needs from the recorded calls as export
// reads them: finish reasons and completion token offsets.
type tapSource struct {
	reconstruct.Source
	mu     sync.Mutex // guards following
	finish map[callKey]string
	tokens map[callKey][2]int
}

func (t *tapSource) Calls(ctx context.Context, id string) ([]*recorder.Call, error) {
	calls, err := t.Source.Calls(ctx, id)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range calls {
		k := callKey{id, c.CallID}
		t.finish[k] = rl.FinishReason(c.Response)
		if c.Tokens != nil {
			t.tokens[k] = [2]int{len(c.Tokens.PromptIDs), len(c.Tokens.CompletionIDs)}
		}
	}
	return calls, nil
}

// collector reads the facts of every trajectory of the pre-pass.
type collector struct {
	tap  *tapSource
	mu   sync.Mutex // guards following
	segs map[string][]segmentFacts
}

func (c *collector) AnnotateTurn(*reconstruct.Turn) error { return nil }

func (c *collector) AnnotateTrajectory(t *reconstruct.Trajectory) error {
	finish := map[string]string{}
	c.tap.mu.Lock()
	for _, tt := range t.Turns {
		finish[tt.CallID] = c.tap.finish[callKey{t.EpisodeID, tt.CallID}]
	}
	c.tap.mu.Unlock()
	sf := segmentFacts{turns: rl.Facts(t, finish), segment: t.Segment}
	for _, tt := range t.Turns {
		sf.seq = append(sf.seq, tt.Seq)
	}
	sf.ep = reconstruct.Trajectory{EpisodeID: t.EpisodeID, TaskID: t.TaskID, GroupID: t.GroupID, Outcome: t.Outcome}
	c.mu.Lock()
	c.segs[t.EpisodeID] = append(c.segs[t.EpisodeID], sf)
	c.mu.Unlock()
	return nil
}

// episodeTurns orders an episode's turns of every segment by seq.
func episodeTurns(segs []segmentFacts) ([]rl.Turn, []int64) {
	type st struct {
		t   rl.Turn
		seq int64
	}
	var all []st
	for _, s := range segs {
		for i, t := range s.turns {
			all = append(all, st{t, s.seq[i]})
		}
	}
	slices.SortStableFunc(all, func(a, b st) int { return int(a.seq - b.seq) })
	turns, seqs := make([]rl.Turn, len(all)), make([]int64, len(all))
	for i, a := range all {
		turns[i], seqs[i] = a.t, a.seq
	}
	return turns, seqs
}

// RuleTotals returns the summed deltas per rule id of the process rewards
// of an episode's turns (its outcome left out), for value scorers; nil for
// an episode that was not scored.
func (s *Scores) RuleTotals(episode string) map[string]float64 {
	es := s.eps[episode]
	if es == nil {
		return nil
	}
	out := map[string]float64{}
	for _, call := range es.order {
		ts := s.turns[callKey{episode, call}]
		if ts == nil {
			continue
		}
		for _, h := range ts.hits {
			out[h.Rule] += h.Delta
		}
	}
	return out
}
