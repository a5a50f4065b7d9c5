package reconstruct

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/lineage"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

// TestTurnsFollowLineage exports every episode of the lineage package's
// drift corpus as turns: each usable call whose parent is usable has the
// kind and parent lineage.Classify gives it. Reconstruct has no threading
// of its own to disagree with it.
func TestTurnsFollowLineage(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../testdata/lineage/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no lineage corpus")
	}
	for _, f := range files {
		calls := storetest.ReadCallsFile(t, f)
		id := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		want := map[string]recorder.Lineage{}
		for i, l := range lineage.Classify(calls) {
			want[calls[i].CallID] = l
		}
		src := newMemSource()
		src.add(recorder.Episode{ID: calls[0].EpisodeID}, calls)
		lines, _ := exportLines(t, src, Options{Format: FormatTurns})
		turns := map[string]Turn{}
		for _, line := range lines {
			var turn Turn
			if err := json.Unmarshal(line, &turn); err != nil {
				t.Fatal(err)
			}
			turns[turn.CallID] = turn
		}
		checked := 0
		for _, c := range calls {
			w, turn := want[c.CallID], turns[c.CallID]
			parent, ok := turns[w.ParentCallID]
			if turn.Outcome.Unusable != "" || !ok || parent.Outcome.Unusable != "" {
				continue
			}
			checked++
			if turn.Lineage.Kind != w.Kind || turn.Lineage.ParentCallID != w.ParentCallID {
				t.Errorf("%s %s: lineage %+v, want %s of %s", id, c.CallID, turn.Lineage, w.Kind, w.ParentCallID)
			}
		}
		if checked == 0 {
			t.Errorf("%s: no call checked", id)
		}
	}
}
