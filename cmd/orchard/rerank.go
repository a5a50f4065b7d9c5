package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchard-rl/orchard/internal/cliconf"
	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/rl/rewards"
	"github.com/orchard-rl/orchard/rl/score"
)

// rerankFlags are the flags of `orchard rerank` and `rerank eval`.
type rerankFlags struct {
	store      storeFlags
	scorer     string
	url, token string
	model      string
	timeout    time.Duration
	task       string
	group      string
	onError    string
}

func (f *rerankFlags) register(cmd *cobra.Command) {
	addStoreFlags(cmd, &f.store)
	fl := cmd.Flags()
	fl.StringVar(&f.scorer, "scorer", "http", "scorer: http (a value-model server), judge (an OpenAI-compatible chat model) or rules (the built-in reward rules' totals)")
	fl.StringVar(&f.url, "scorer-url", "", "http: the scoring endpoint; judge: the model's base URL, e.g. http://host:8000/v1")
	fl.StringVar(&f.token, "scorer-token", "", "bearer token sent to the scorer")
	cliconf.EnvOnly(fl, "scorer-token")
	fl.StringVar(&f.model, "judge-model", "", "judge: the model name")
	fl.DurationVar(&f.timeout, "scorer-timeout", 60*time.Second, "time limit of one candidate's score")
	fl.StringVar(&f.task, "task-id", "", "only candidates of this task id")
	fl.StringVar(&f.group, "group-id", "", "only candidates of this group id")
	aliasIDFlags(fl)
	fl.StringVar(&f.onError, "on-error", "stop", "when a candidate cannot be scored: stop (exit 1), skip (leave it out) or zero (score it 0)")
}

func (f *rerankFlags) newScorer(src reconstruct.Source, eps []*score.Episode) (score.Scorer, error) {
	if f.scorer == "rules" {
		return rulesScorer(src, eps), nil
	}
	if f.url == "" {
		return nil, fmt.Errorf("--scorer-url is required")
	}
	switch f.scorer {
	case "http":
		return score.NewHTTP(score.HTTPOptions{URL: f.url, Token: f.token, Timeout: f.timeout}), nil
	case "judge":
		if f.model == "" {
			return nil, fmt.Errorf("--judge-model is required with --scorer judge")
		}
		return score.NewJudge(score.JudgeOptions{BaseURL: f.url, Model: f.model, APIKey: f.token, Timeout: f.timeout}), nil
	}
	return nil, fmt.Errorf("--scorer %q: want http, judge or rules", f.scorer)
}

// rulesScorer scores candidates by the built-in reward rules' totals,
// computed once, on first use, for all of eps.
func rulesScorer(src reconstruct.Source, eps []*score.Episode) score.Scorer {
	var once sync.Once
	var scores *rewards.Scores
	var err error
	totals := func(ctx context.Context, ep *score.Episode) (score.RuleTotals, error) {
		once.Do(func() {
			ids := make([]string, len(eps))
			for i, e := range eps {
				ids[i] = e.ID
			}
			scores, err = rewards.Score(ctx, src, reconstruct.Options{Episodes: ids}, rewards.Options{})
		})
		if err != nil {
			return nil, err
		}
		return scores.RuleTotals(ep.ID), nil
	}
	return score.NewRules(score.RulesOptions{Totals: totals})
}

func newRerankCmd() *cobra.Command {
	var f rerankFlags
	cmd := &cobra.Command{
		Use:   "rerank --scorer http|judge|rules [--scorer-url URL]",
		Short: "Score each task's candidate episodes and pick the best of N",
		Long: `Rerank scores every selected episode with the scorer (docs/rl-rollout.md has the scorer API)
and writes one JSON line per task: the chosen episode, its value and every candidate's score.
With --on-error skip or zero a candidate that cannot be scored is reported on stderr and the run
goes on.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			choices, err := runRerank(cmd, &f)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			for _, c := range choices {
				if err := enc.Encode(c); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.AddCommand(newRerankEvalCmd())
	return cmd
}

func newRerankEvalCmd() *cobra.Command {
	var f rerankFlags
	cmd := &cobra.Command{
		Use:   "eval --scorer http|judge|rules [--scorer-url URL]",
		Short: "Measure a scorer on finished episodes: pass@N, best@N, random@N, AUC, ECE",
		Long: `Eval reranks finished episodes (success means reward > 0) and prints, as one JSON object, the
share of tasks an oracle solves (pass@N), the share whose chosen candidate succeeded (best@N), a
random pick's expected share (random@N), the AUC of the values against outcomes and their expected
calibration error over 10 bins (ECE).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			choices, err := runRerank(cmd, &f)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(score.Evaluate(choices))
		},
	}
	f.register(cmd)
	return cmd
}

func runRerank(cmd *cobra.Command, f *rerankFlags) ([]score.Choice, error) {
	onErr, err := score.ParseOnError(f.onError)
	if err != nil {
		return nil, fmt.Errorf("--%w", err)
	}
	src, err := openReadStore(cmd, &f.store)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	eps, err := score.Load(cmd.Context(), src, recorder.Filter{TaskID: f.task, GroupID: f.group})
	if err != nil {
		return nil, err
	}
	if cmd.Name() == "eval" {
		eps = finished(eps)
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("no episodes to rerank")
	}
	sc, err := f.newScorer(src, eps)
	if err != nil {
		return nil, err
	}
	stderr := cmd.ErrOrStderr()
	return score.Rerank(cmd.Context(), eps, score.RerankOptions{Scorer: sc, OnError: onErr,
		Failed: func(err error) { fmt.Fprintf(stderr, "orchard rerank: %s: %v\n", onErr, err) }})
}

// finished keeps the episodes with a final status.
func finished(eps []*score.Episode) []*score.Episode {
	var out []*score.Episode
	for _, ep := range eps {
		if ep.Status != recorder.StatusRunning {
			out = append(out, ep)
		}
	}
	return out
}
