package rewards

import (
	"context"
	"fmt"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

// memSource is an in-memory reconstruct.Source.
type memSource struct {
	order []string
	eps   map[string]recorder.EpisodeSummary
	calls map[string][]*recorder.Call
}

func newMemSource() *memSource {
	return &memSource{eps: map[string]recorder.EpisodeSummary{}, calls: map[string][]*recorder.Call{}}
}

func (m *memSource) add(ep recorder.Episode, calls []*recorder.Call) {
	m.order = append(m.order, ep.ID)
	m.eps[ep.ID] = recorder.EpisodeSummary{Episode: ep}
	m.calls[ep.ID] = calls
}

func (m *memSource) ListEpisodes(_ context.Context, f recorder.Filter) ([]recorder.EpisodeSummary, string, error) {
	var out []recorder.EpisodeSummary
	for _, id := range m.order {
		out = append(out, m.eps[id])
	}
	return out, "", nil
}

func (m *memSource) Episode(_ context.Context, id string) (*recorder.EpisodeSummary, error) {
	e, ok := m.eps[id]
	if !ok {
		return nil, fmt.Errorf("episode %s: %w", id, recorder.ErrNotFound)
	}
	return &e, nil
}

func (m *memSource) Calls(_ context.Context, id string) ([]*recorder.Call, error) {
	return m.calls[id], nil
}

// readInput adds a recorded episode file to src.
func readInput(t testing.TB, src *memSource, path string) {
	t.Helper()
	src.add(storetest.ReadEpisodeFile(t, path))
}
