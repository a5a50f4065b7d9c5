package reconstruct

import (
	"context"
	"strconv"

	"github.com/orchard-rl/orchard/recorder"
)

// memSource is an in-memory [Source] that pages its listing two episodes
// at a time, so that tests cover cursors.
type memSource struct {
	eps   []recorder.EpisodeSummary
	calls map[string][]*recorder.Call
}

func newMemSource() *memSource { return &memSource{calls: map[string][]*recorder.Call{}} }

func (m *memSource) add(ep recorder.Episode, calls []*recorder.Call) {
	if ep.Status == "" {
		ep.Status = recorder.StatusRunning
	}
	m.eps = append(m.eps, recorder.EpisodeSummary{Episode: ep, Calls: len(calls)})
	m.calls[ep.ID] = calls
}

func (m *memSource) ListEpisodes(_ context.Context, f recorder.Filter) ([]recorder.EpisodeSummary, string, error) {
	start, _ := strconv.Atoi(f.Cursor)
	var out []recorder.EpisodeSummary
	i := start
	for ; i < len(m.eps) && len(out) < 2; i++ {
		e := m.eps[i]
		if (f.TaskID == "" || e.TaskID == f.TaskID) && (f.GroupID == "" || e.GroupID == f.GroupID) &&
			(f.Status == "" || e.Status == f.Status) && !e.CreatedAt.Before(f.Since) {
			out = append(out, e)
		}
	}
	if i >= len(m.eps) {
		return out, "", nil
	}
	return out, strconv.Itoa(i), nil
}

func (m *memSource) Episode(_ context.Context, id string) (*recorder.EpisodeSummary, error) {
	for i := range m.eps {
		if m.eps[i].ID == id {
			e := m.eps[i]
			return &e, nil
		}
	}
	return nil, recorder.ErrNotFound
}

func (m *memSource) Calls(_ context.Context, id string) ([]*recorder.Call, error) {
	return m.calls[id], nil
}

func recorderEpisode(id string) recorder.Episode { return recorder.Episode{ID: id} }
