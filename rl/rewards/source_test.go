package rewards

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
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

// readInput reads a recorded episode: the episode line, then its calls.
func readInput(t testing.TB, src *memSource, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	var ep recorder.Episode
	var calls []*recorder.Call
	for i := 0; sc.Scan(); i++ {
		v := any(&ep)
		if i > 0 {
			c := new(recorder.Call)
			calls, v = append(calls, c), c
		}
		if err := json.Unmarshal(sc.Bytes(), v); err != nil {
			t.Fatal(err)
		}
	}
	src.add(ep, calls)
}
