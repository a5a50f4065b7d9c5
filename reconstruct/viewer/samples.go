package viewer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/recorder"
)

// samples reconstructs one episode in format and decodes its lines: the
// viewer shows exactly what an export would write, rewards included.
func samples[T any](ctx context.Context, h *Handler, id, format string) ([]T, error) {
	var buf bytes.Buffer
	_, err := reconstruct.Export(ctx, h.opts.Source, &buf, reconstruct.Options{
		Format: format, Episodes: []string{id}, Workers: 1, Annotator: h.opts.Annotator})
	if err != nil {
		return nil, fmt.Errorf("reconstruct episode %s: %w", id, err)
	}
	var out []T
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var v T
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("decode %s sample of %s: %w", format, id, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func (h *Handler) trajectories(ctx context.Context, id string) ([]reconstruct.Trajectory, error) {
	return samples[reconstruct.Trajectory](ctx, h, id, reconstruct.FormatTrajectories)
}

func (h *Handler) turns(ctx context.Context, id string) ([]reconstruct.Turn, error) {
	return samples[reconstruct.Turn](ctx, h, id, reconstruct.FormatTurns)
}

// driftClasses are the drift filter's values: how a segment's token
// prefix broke (reconstruct's Drift.Class).
var driftClasses = []string{string(recorder.LineageRetokenized), string(recorder.LineageTemplateRewrite), string(recorder.LineageEdited), "any"}

// deepMatch applies the filters that need the episode's calls or samples.
func (h *Handler) deepMatch(ctx context.Context, q *listQuery, row listRow) (listRow, bool, error) {
	calls, err := h.opts.Source.Calls(ctx, row.ID)
	if err != nil {
		return row, false, fmt.Errorf("calls of %s: %w", row.ID, err)
	}
	if len(calls) > 0 {
		row.Harness = calls[0].Harness
	}
	if q.Harness != "" && row.Harness != q.Harness {
		return row, false, nil
	}
	if q.Drift == "" && q.Rule == "" && q.Search == "" {
		return row, true, nil
	}
	trajs, err := h.trajectories(ctx, row.ID)
	if err != nil {
		return row, false, err
	}
	return row, matchDrift(trajs, q.Drift) && matchRule(trajs, q.Rule) && matchText(trajs, q.Search), nil
}

func matchDrift(trajs []reconstruct.Trajectory, class string) bool {
	if class == "" {
		return true
	}
	for _, t := range trajs {
		if d := t.Lineage.Drift; d != nil && (class == "any" || d.Class == class) {
			return true
		}
	}
	return false
}

func matchRule(trajs []reconstruct.Trajectory, rule string) bool {
	if rule == "" {
		return true
	}
	for _, t := range trajs {
		for _, tt := range t.Turns {
			for _, hit := range tt.RuleHits {
				if hit.Rule == rule {
					return true
				}
			}
		}
	}
	return false
}

// matchText reports whether any message holds s, ignoring case.
func matchText(trajs []reconstruct.Trajectory, s string) bool {
	if s == "" {
		return true
	}
	s = strings.ToLower(s)
	for _, t := range trajs {
		for i := range t.Messages {
			if strings.Contains(strings.ToLower(messageSearchText(&t.Messages[i])), s) {
				return true
			}
		}
	}
	return false
}

// messageSearchText is everything of m a person reads.
func messageSearchText(m *reconstruct.ChatMessage) string {
	var b strings.Builder
	b.WriteString(contentText(m.Content))
	b.WriteString("\n" + m.ReasoningContent)
	for _, tc := range m.ToolCalls {
		b.WriteString("\n" + tc.Function.Name + " " + tc.Function.Arguments)
	}
	return b.String()
}

// contentText is a message's text: the string, or its text parts joined
// with "\n" (as reconstruct joins them), an image as "[image]".
func contentText(c any) string {
	switch v := c.(type) {
	case string:
		return v
	case []any:
		var parts []string
		for _, p := range v {
			m, _ := p.(map[string]any)
			if t, ok := m["text"].(string); ok {
				parts = append(parts, t)
			} else if m["type"] == "image_url" {
				parts = append(parts, "[image]")
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}
