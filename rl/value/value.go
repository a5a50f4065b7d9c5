package value

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/orchard-rl/orchard/reconstruct"
)

// Format is the export format name of value data.
const Format = "value"

// Schema is the version of a value line.
const Schema = "orchard.value/v1"

// Pair is one orchard.value/v1 line.
type Pair struct {
	Schema    string                    `json:"schema"`
	EpisodeID string                    `json:"episode_id"`
	TaskID    *string                   `json:"task_id"`
	GroupID   *string                   `json:"group_id"`
	CallID    string                    `json:"call_id"`
	Turn      int                       `json:"turn"` // index of the turn in its segment
	Segment   *int                      `json:"segment"`
	Messages  []reconstruct.ChatMessage `json:"messages"`  // the prompt, then the turn's completion
	InputIDs  []int32                   `json:"input_ids"` // prompt ids then completion ids; null without ids
	Status    string                    `json:"status"`    // the episode's status
	Outcome   *float64                  `json:"outcome"`   // the episode's reward; null when none was posted
	Success   *bool                     `json:"success"`   // outcome > 0; null with the outcome
}

// Options are the value export's own options.
type Options struct {
	// MaxObservation, when positive, cuts the text of tool and user
	// messages longer than this many bytes to their head and tail.
	MaxObservation int
}

// Export writes value pairs of the episodes opts selects (its Format is
// ignored: turns are read) and returns the export's stats with Samples
// counting value lines.
func Export(ctx context.Context, src reconstruct.Source, w io.Writer, opts reconstruct.Options, vo Options) (reconstruct.Stats, error) {
	opts.Format = reconstruct.FormatTurns
	pr, pw := io.Pipe()
	var st reconstruct.Stats
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		st, err = reconstruct.Export(ctx, src, pw, opts)
		pw.CloseWithError(err)
		return err
	})
	n := 0
	g.Go(func() error {
		var err error
		n, err = convert(pr, w, vo)
		pr.CloseWithError(err)
		return err
	})
	err := g.Wait()
	st.Samples = n
	return st, err
}

// convert reads turn lines from r and writes their value pairs to w.
func convert(r io.Reader, w io.Writer, vo Options) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<30)
	enc := json.NewEncoder(w)
	n := 0
	for sc.Scan() {
		var t reconstruct.Turn
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			return n, fmt.Errorf("read turn: %w", err)
		}
		p, ok := pair(&t, vo)
		if !ok {
			continue
		}
		if err := enc.Encode(p); err != nil {
			return n, fmt.Errorf("write value pair: %w", err)
		}
		n++
	}
	return n, sc.Err()
}

// pair builds t's value pair; calls no sample trains on have none.
func pair(t *reconstruct.Turn, vo Options) (Pair, bool) {
	if t.Completion == nil || t.Outcome.Unusable != "" {
		return Pair{}, false
	}
	p := Pair{Schema: Schema, EpisodeID: t.EpisodeID, TaskID: t.TaskID, GroupID: t.GroupID, CallID: t.CallID, Turn: t.Turn,
		Segment: t.Segment, Status: t.Outcome.EpisodeStatus, Outcome: t.Outcome.EpisodeReward}
	for _, m := range t.Prompt {
		p.Messages = append(p.Messages, compact(m, vo.MaxObservation))
	}
	p.Messages = append(p.Messages, *t.Completion)
	if t.Tokens != nil && len(t.Tokens.PromptIDs) > 0 {
		p.InputIDs = append(append([]int32{}, t.Tokens.PromptIDs...), t.Tokens.CompletionIDs...)
	}
	if p.Outcome != nil {
		ok := *p.Outcome > 0
		p.Success = &ok
	}
	return p, true
}

// compact cuts a long tool or user text to its head and tail.
func compact(m reconstruct.ChatMessage, limit int) reconstruct.ChatMessage {
	s, ok := m.Content.(string)
	if limit <= 0 || !ok || len(s) <= limit || (m.Role != "tool" && m.Role != "user") {
		return m
	}
	head, tail := limit/2, len(s)-(limit-limit/2)
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	m.Content = s[:head] + fmt.Sprintf("\n[... %d bytes cut ...]\n", tail-head) + s[tail:]
	return m
}
