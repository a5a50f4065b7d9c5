package reconstruct

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// scriptedEpisode plays turns model calls of one agent thread and returns
// the ground truth token sequence and generated-token mask.
func scriptedEpisode(api recorder.API, seed uint64, turns int) (*sim, *simThread) {
	s := newSim(api, fmt.Sprintf("ep-%s-%d", api, seed), seed, true)
	th := s.newThread("You are an agent.", "bash")
	s.user(th, "do the task")
	for i := range turns {
		r := s.reply(s.rng.IntN(4), fmt.Sprintf("answer %d", i))
		s.call(th, r)
		if i == turns-1 {
			break
		}
		if len(r.calls) > 0 {
			s.results(th, r)
		} else {
			s.user(th, "continue")
		}
	}
	return s, th
}

func exportLines(t testing.TB, src Source, opts Options) ([]json.RawMessage, Stats) {
	t.Helper()
	var buf bytes.Buffer
	st, err := Export(context.Background(), src, &buf, opts)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	var lines []json.RawMessage
	for _, l := range bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n")) {
		if len(l) > 0 {
			lines = append(lines, json.RawMessage(l))
		}
	}
	return lines, st
}

// TestTokenTrajectoryProperty checks, for scripted episodes of random
// length in every API, that the one trajectory's input_ids are the ground
// truth token sequence and its loss mask is 1 exactly on generated tokens.
func TestTokenTrajectoryProperty(t *testing.T) {
	t.Parallel()
	for _, api := range []recorder.API{apiChat, apiResponses, apiMessages, apiCompletions} {
		for seed := uint64(1); seed <= 4; seed++ {
			turns := 1 + int((seed*7919+uint64(len(api))*104729)%300)
			if seed == 1 {
				turns = 300
			}
			t.Run(fmt.Sprintf("%s/seed=%d/turns=%d", api, seed, turns), func(t *testing.T) {
				t.Parallel()
				s, th := scriptedEpisode(api, seed, turns)
				src := newMemSource()
				src.add(recorder.Episode{ID: s.episode}, s.calls)
				lines, st := exportLines(t, src, Options{Check: true, Workers: 2})
				if len(lines) != 1 {
					t.Fatalf("got %d trajectories, want 1", len(lines))
				}
				var tr Trajectory
				if err := json.Unmarshal(lines[0], &tr); err != nil {
					t.Fatal(err)
				}
				if tr.Tokens == nil {
					t.Fatal("no tokens")
				}
				if !slices.Equal(tr.Tokens.InputIDs, th.ids) {
					t.Fatalf("input_ids differ from ground truth (len %d, want %d)", len(tr.Tokens.InputIDs), len(th.ids))
				}
				for k, g := range th.gen {
					if (tr.Tokens.LossMask[k] == 1) != g {
						t.Fatalf("loss_mask[%d] = %d, want generated=%v", k, tr.Tokens.LossMask[k], g)
					}
				}
				masked := 0
				for _, m := range tr.LossMask {
					masked += int(m)
				}
				if masked != turns || len(tr.Turns) != turns {
					t.Errorf("masked messages = %d, turns = %d, want %d each", masked, len(tr.Turns), turns)
				}
				if n := st.ViolationCount(); n != 0 || st.Checked != 1 {
					t.Errorf("check: %d violations, %d checked; want 0, 1", n, st.Checked)
				}
			})
		}
	}
}
