package reconstruct

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// manyEpisodes is a source of n scripted episodes of varied APIs.
func manyEpisodes(n int) *memSource {
	src := newMemSource()
	apis := []recorder.API{apiChat, apiResponses, apiMessages, apiCompletions}
	for i := range n {
		s := newSim(apis[i%4], fmt.Sprintf("ep-%02d", i), uint64(i+1), i%3 != 0)
		th := s.newThread("sys", "bash")
		s.user(th, "go")
		agentLoop(s, th, 1+i%5, 1+i%2)
		src.add(recorder.Episode{ID: s.episode, TaskID: fmt.Sprintf("t%d", i%2)}, s.calls)
	}
	return src
}

func TestExportDeterministicAcrossWorkers(t *testing.T) {
	t.Parallel()
	src := manyEpisodes(13)
	var want []byte
	for _, workers := range []int{1, 2, 7} {
		var buf bytes.Buffer
		st, err := Export(context.Background(), src, &buf, Options{Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		if st.Episodes != 13 {
			t.Fatalf("Episodes = %d, want 13", st.Episodes)
		}
		if want == nil {
			want = buf.Bytes()
		} else if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("output with %d workers differs from 1 worker", workers)
		}
	}
}

func TestExportFilters(t *testing.T) {
	t.Parallel()
	src := manyEpisodes(9)
	tests := []struct {
		name string
		opts Options
		want []string
	}{
		{"task", Options{Filter: recorder.Filter{TaskID: "t1"}}, []string{"ep-01", "ep-03", "ep-05", "ep-07"}},
		{"limit", Options{Filter: recorder.Filter{Limit: 3}}, []string{"ep-00", "ep-01", "ep-02"}},
		{"episodes", Options{Episodes: []string{"ep-08", "ep-02"}}, []string{"ep-08", "ep-02"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Format = FormatTrajectories
			lines, _ := exportLines(t, src, tt.opts)
			var got []string
			for _, l := range lines {
				var tr Trajectory
				if err := json.Unmarshal(l, &tr); err != nil {
					t.Fatal(err)
				}
				got = append(got, tr.EpisodeID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("episodes = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestExportErrors(t *testing.T) {
	t.Parallel()
	src := manyEpisodes(2)
	tests := []struct {
		name string
		opts Options
		want error
	}{
		{"format", Options{Format: "parquet"}, ErrBadOptions},
		{"drift", Options{OnDrift: "ignore"}, ErrBadOptions},
		{"workers", Options{Workers: -1}, ErrBadOptions},
		{"missing episode", Options{Episodes: []string{"nope"}}, recorder.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Export(context.Background(), src, &bytes.Buffer{}, tt.opts)
			if !errors.Is(err, tt.want) {
				t.Errorf("Export() error = %v, want %v", err, tt.want)
			}
		})
	}
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestExportWriteErrorStops(t *testing.T) {
	t.Parallel()
	_, err := Export(context.Background(), manyEpisodes(20), failWriter{}, Options{Workers: 3})
	if err == nil || err.Error() != "write: disk full" {
		t.Errorf("Export() error = %v, want write: disk full", err)
	}
}

// TestDriftActions exports the token-drift episode with each action.
func TestDriftActions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		action     string
		lines      int
		violations int
		dropped    int
	}{
		{DriftSplit, 2, 0, 0},
		{DriftDrop, 0, 0, 1},
		{DriftKeep, 1, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			src := newMemSource()
			src.add(recorder.Episode{ID: "ep"}, playDrift().calls)
			lines, st := exportLines(t, src, Options{OnDrift: tt.action, Check: true})
			if len(lines) != tt.lines || st.ViolationCount() != tt.violations || st.DroppedSegments != tt.dropped {
				t.Errorf("lines, violations, dropped = %d, %d, %d; want %d, %d, %d",
					len(lines), st.ViolationCount(), st.DroppedSegments, tt.lines, tt.violations, tt.dropped)
			}
			if st.Drift[string(recorder.LineageTemplateRewrite)] != 1 {
				t.Errorf("Drift = %v, want one template_rewrite", st.Drift)
			}
		})
	}
}

// TestLineageClassifiedOnRead gives a call a recorded lineage that
// contradicts its prompt, as a proxy replica that saw only part of the
// episode would record: reconstruct classifies the stored episode itself,
// so the call still continues the one thread.
func TestLineageClassifiedOnRead(t *testing.T) {
	t.Parallel()
	s := newSim(apiChat, "ep", 9, false)
	th := s.newThread("sys", "bash")
	s.user(th, "go")
	agentLoop(s, th, 3, 1)
	s.calls[2].Lineage = &recorder.Lineage{Kind: recorder.LineageFork, ParentCallID: s.calls[1].CallID}
	src := newMemSource()
	src.add(recorder.Episode{ID: "ep"}, s.calls)
	lines, _ := exportLines(t, src, Options{})
	if len(lines) != 1 {
		t.Fatalf("got %d segments, want 1", len(lines))
	}
	var tr Trajectory
	if err := json.Unmarshal(lines[0], &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Lineage.Kind != SegmentRoot || len(tr.Lineage.Calls) != len(s.calls) {
		t.Errorf("segment 0 lineage = %+v, want a root of all %d calls", tr.Lineage, len(s.calls))
	}
}
