package rewards

import (
	"bytes"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/recorder"
)

// TestNoFinish: an episode that was never finished has no outcome: it is
// counted, its advantages and trajectory reward stay null, and it leaves
// its finished peer's advantages as in a group of one.
func TestNoFinish(t *testing.T) {
	src := newMemSource()
	ep, calls := chatEpisode(t, "ep-open", recorder.StatusRunning, [][3]string{{"bash", bash("ls"), "src"}}, "Done.")
	ep.GroupID = "g"
	src.add(ep, calls)
	ep2, calls2 := chatEpisode(t, "ep-done", recorder.StatusSuccess, [][3]string{{"bash", bash("ls"), "src"}}, "Done.")
	ep2.GroupID = "g"
	src.add(ep2, calls2)
	var buf bytes.Buffer
	_, s, err := Export(t.Context(), src, &buf, reconstruct.Options{}, defaultOpts)
	if err != nil {
		t.Fatal(err)
	}
	if s.Stats.NoOutcome != 1 || s.Stats.Episodes != 2 {
		t.Fatalf("NoOutcome %d of %d episodes, want 1 of 2", s.Stats.NoOutcome, s.Stats.Episodes)
	}
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if got := gjson.GetBytes(lines[0], `{reward,"adv":turns.#.advantage,"ret":turns.#.return}`).Raw; got != `{"reward":null,"adv":[null,null],"ret":[0,0]}` {
		t.Errorf("unfinished episode: %s", got)
	}
	if got := gjson.GetBytes(lines[1], `{reward,"adv":turns.#.advantage}`).Raw; got != `{"reward":1,"adv":[0,0]}` {
		t.Errorf("finished peer: %s", got)
	}
}
