package rewards

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/rl/advantage"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/rl")

var defaultOpts = Options{Advantage: advantage.Options{Gamma: 1, Lambda: 0.1, Estimator: advantage.RLOO}}

// rewardFields keeps the fields a rewards export fills, one line per
// sample, so the goldens do not repeat what reconstruct's goldens test.
func rewardFields(t *testing.T, out []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		r := gjson.Parse(line)
		keep := []string{"episode_id", "call_id", "segment", "reward", "return", "advantage", "rule_hits", "reward_config", "tokens.advantages"}
		if r.Get("turns").Exists() {
			keep = []string{"episode_id", "segment", "reward", "reward_config", `"calls":turns.#.call_id`, `"rewards":turns.#.reward`,
				`"returns":turns.#.return`, `"advantages":turns.#.advantage`, `"rule_hits":turns.#.rule_hits`, `"token_advantages":tokens.advantages`}
		}
		b.WriteString(r.Get("{" + strings.Join(keep, ",") + "}").Raw)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func checkGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update and review the diff)\n got %s", golden, got)
	}
}

// TestGoldenRewards exports every recorded episode of testdata/reconstruct
// with the default rules, as turns and trajectories, and compares the
// reward fields with testdata/rl.
func TestGoldenRewards(t *testing.T) {
	inputs, err := filepath.Glob("../../testdata/reconstruct/*.input.jsonl")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input.jsonl")
		for _, format := range []string{reconstruct.FormatTurns, reconstruct.FormatTrajectories} {
			t.Run(name+"/"+format, func(t *testing.T) {
				src := newMemSource()
				readInput(t, src, in)
				var buf bytes.Buffer
				st, s, err := Export(t.Context(), src, &buf, reconstruct.Options{Format: format, Workers: 3, Check: true}, defaultOpts)
				if err != nil {
					t.Fatal(err)
				}
				if st.ViolationCount() != 0 || s.Stats.Episodes != 1 {
					t.Fatalf("violations %v, episodes %d", st.Violations, s.Stats.Episodes)
				}
				checkGolden(t, filepath.Join("../../testdata/rl", name+"."+format+".golden"), rewardFields(t, buf.Bytes()))
			})
		}
	}
}
