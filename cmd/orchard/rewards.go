package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/rl/advantage"
	"github.com/orchard-rl/orchard/rl/rewards"
	"github.com/orchard-rl/orchard/rl/rules"
)

// rewardFlags are the scoring flags of `export` and `rewards explain`.
type rewardFlags struct {
	rules     string // "" when scoring is off (export only)
	gamma     float64
	lambda    float64
	estimator string
}

func addRewardFlags(cmd *cobra.Command, f *rewardFlags, def string) {
	fl := cmd.Flags()
	fl.StringVar(&f.rules, "rewards", def, "score samples with a rules file, or the built-in rules: --rewards or --rewards=default|FILE (docs/rl.md)")
	fl.Lookup("rewards").NoOptDefVal = rules.DefaultFile
	fl.Float64Var(&f.gamma, "gamma", 1, "discount of returns-to-go, in [0, 1]")
	fl.Float64Var(&f.lambda, "lambda", 0.1, "weight of the per-turn process advantage")
	fl.StringVar(&f.estimator, "estimator", string(advantage.RLOO), "outcome advantage estimator: rloo|grpo|drgrpo")
}

// options loads the rules and checks the parameters.
func (f *rewardFlags) options() (rewards.Options, error) {
	o := rewards.Options{Advantage: advantage.Options{Gamma: f.gamma, Lambda: f.lambda, Estimator: advantage.Estimator(f.estimator)}}
	if err := o.Advantage.Validate(); err != nil {
		return o, fmt.Errorf("--%w", err)
	}
	r, err := rules.Load(f.rules)
	if err != nil {
		return o, err
	}
	o.Rules = r
	return o, nil
}

// exportWithRewards exports with or without scoring, and reports what
// scoring counted.
func (f *rewardFlags) export(cmd *cobra.Command, src reconstruct.Source, w io.Writer, opts reconstruct.Options) (reconstruct.Stats, error) {
	if f.rules == "" {
		return reconstruct.Export(cmd.Context(), src, w, opts)
	}
	o, err := f.options()
	if err != nil {
		return reconstruct.Stats{}, err
	}
	st, s, err := rewards.Export(cmd.Context(), src, w, opts, o)
	if s != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "rewards %s: %d episodes, %d turns, %d rule hits, %d episodes without an outcome\n",
			s.Config, s.Stats.Episodes, s.Stats.Turns, s.Stats.Hits, s.Stats.NoOutcome)
	}
	return st, err
}

// checkFormat accepts ca-sft, which only a scored export writes.
func (f *rewardFlags) checkFormat(format string) (bool, error) {
	if format != rewards.FormatCASFT {
		return false, nil
	}
	if f.rules == "" {
		return true, fmt.Errorf("--format %s needs --rewards", format)
	}
	return true, nil
}

func newRewardsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "rewards", Short: "Inspect dense rewards (docs/rl.md)"}
	cmd.AddCommand(newRewardsExplainCmd())
	return cmd
}

func newRewardsExplainCmd() *cobra.Command {
	var (
		store  storeFlags
		rf     rewardFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "explain EPISODE",
		Short: "Print, per turn, the rules that fired with their evidence, the reward, return and advantage",
		Long: "Explain scores EPISODE with its group (the episodes of its group id, else of its task id) and prints\n" +
			"one line per turn and one per rule hit, with the text that fired it.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := openReadStore(cmd, &store)
			if err != nil {
				return err
			}
			defer src.Close()
			o, err := rf.options()
			if err != nil {
				return err
			}
			ep, err := src.Episode(cmd.Context(), args[0])
			if err != nil {
				return err // the store's error names the episode
			}
			ex := reconstruct.Options{Episodes: []string{ep.ID}}
			if ep.GroupID != "" || ep.TaskID != "" {
				ex = reconstruct.Options{Filter: ex.Filter}
				ex.Filter.GroupID = ep.GroupID
				if ep.GroupID == "" {
					ex.Filter.TaskID = ep.TaskID
				}
			}
			x, err := rewards.Explain(cmd.Context(), src, ex, o, ep.ID)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetEscapeHTML(false)
				return enc.Encode(x)
			}
			x.WriteText(cmd.OutOrStdout())
			return nil
		},
	}
	addStoreFlags(cmd, &store)
	addRewardFlags(cmd, &rf, rules.DefaultFile)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the explanation as one JSON object")
	return cmd
}
