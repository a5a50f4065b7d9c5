package reconstruct

import (
	"encoding/json"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// latestReasoningOnly rewrites a Responses request as a harness that
// resends only the latest reasoning item would: earlier ones are dropped.
func latestReasoningOnly(t *testing.T, req json.RawMessage) json.RawMessage {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(req, &body); err != nil {
		t.Fatal(err)
	}
	in, _ := body["input"].([]any)
	last := -1
	for i, it := range in {
		if m, _ := it.(map[string]any); m["type"] == "reasoning" {
			last = i
		}
	}
	var kept []any
	for i, it := range in {
		if m, _ := it.(map[string]any); m["type"] != "reasoning" || i == last {
			kept = append(kept, it)
		}
	}
	body["input"] = kept
	return marshal(body)
}

// TestSlotFoundByUnits: when a harness drops earlier reasoning items from
// the history it resends, each completion is still put back exactly where
// the next prompt holds it. The slot is found by the lineage package's
// message units, which reasoning items do not make, not by counting the
// previous prompt's items.
func TestSlotFoundByUnits(t *testing.T) {
	t.Parallel()
	s := newSim(apiResponses, "ep", 5, false)
	th := s.newThread("sys", "bash")
	s.user(th, "go")
	agentLoop(s, th, 4, 1)
	for _, c := range s.calls {
		c.Request = latestReasoningOnly(t, c.Request)
	}
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
	// system, user, then per call: its completion, and a tool result
	// after each but the last
	if want := 2 + 2*len(s.calls) - 1; len(tr.Messages) != want {
		t.Fatalf("%d messages, want %d: %s", len(tr.Messages), want, lines[0])
	}
	for j, turn := range tr.Turns {
		if want := 2 + 2*j; turn.MessageIndex != want || tr.LossMask[want] != 1 {
			t.Errorf("turn %d: completion at message %d (loss mask %v), want at %d", j, turn.MessageIndex, tr.LossMask, want)
		}
	}
}
