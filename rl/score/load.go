package score

import (
	"context"
	"fmt"
	"strings"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/recorder"
)

// Source is what [Load] reads: [recorder.Store] satisfies it.
type Source interface {
	ListEpisodes(ctx context.Context, f recorder.Filter) ([]recorder.EpisodeSummary, string, error)
	Calls(ctx context.Context, episodeID string) ([]*recorder.Call, error)
}

// Load returns the episodes f selects (all pages), oldest first, as
// candidates: the prompt is the first user message of the last call's
// request, the final answer the text of its completion.
func Load(ctx context.Context, src Source, f recorder.Filter) ([]*Episode, error) {
	var out []*Episode
	for {
		page, next, err := src.ListEpisodes(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("list episodes: %w", err)
		}
		for i := range page {
			ep, err := load(ctx, src, &page[i])
			if err != nil {
				return nil, err
			}
			out = append(out, ep)
		}
		if next == "" {
			return out, nil
		}
		f.Cursor = next
	}
}

func load(ctx context.Context, src Source, s *recorder.EpisodeSummary) (*Episode, error) {
	ep := &Episode{ID: s.ID, TaskID: s.TaskID, Status: s.Status, Calls: s.Calls, Reward: s.Reward}
	calls, err := src.Calls(ctx, s.ID)
	if err != nil {
		return nil, fmt.Errorf("calls of %s: %w", s.ID, err)
	}
	if len(calls) == 0 {
		return ep, nil
	}
	last := calls[len(calls)-1]
	if conv, err := reconstruct.DecodeRequest(last.API, last.Request); err == nil {
		for _, m := range conv.Messages {
			if m.Role == "user" {
				ep.Prompt = text(m.Parts)
				break
			}
		}
	}
	if msgs, err := reconstruct.DecodeCompletion(last.API, last.Response); err == nil {
		var b strings.Builder
		for _, m := range msgs {
			b.WriteString(text(m.Parts))
		}
		ep.Final = b.String()
	}
	return ep, nil
}

func text(parts []reconstruct.Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Kind == reconstruct.KindText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
