package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"github.com/spf13/cobra"
	"github.com/tidwall/gjson"
	"golang.org/x/sync/errgroup"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/rl/plan"
	"github.com/orchard-rl/orchard/rl/rollout"
)

// Episode metadata keys of an adaptive run: with the task id and the
// "sample" key every rollout sets, they name a rollout uniquely, so a
// stopped run resumes from the store alone.
const (
	mdPlanRun       = "plan_run"
	mdPlanStep      = "plan_step"
	mdPolicyVersion = "policy_version"
)

// adaptiveFlags are the planner flags of `orchard rollout --adaptive` and
// `orchard rollout plan`.
type adaptiveFlags struct {
	on      bool
	store   storeFlags
	budget  int
	runID   string
	seed    uint64
	batch   int
	nmax    int
	lo, hi  float64
	version int
	groups  string
}

func (a *adaptiveFlags) register(cmd *cobra.Command, live bool) {
	fl := cmd.Flags()
	if live {
		fl.BoolVar(&a.on, "adaptive", false, "spend --budget rollouts where groups are informative (docs/rl-rollout.md); --n is the group size")
		fl.IntVar(&a.budget, "budget", 0, "adaptive: rollouts to run in all (required with --adaptive)")
		fl.StringVar(&a.runID, "run", "", "adaptive: run id; pass the id of a stopped run to resume it (default: a new id)")
		fl.StringVar(&a.groups, "groups", "", "adaptive: write the selected groups here, one JSON line each")
	}
	addStoreFlags(cmd, &a.store)
	fl.Uint64Var(&a.seed, "seed", 1, "planner seed: with the outcomes it fixes every decision")
	fl.IntVar(&a.batch, "batch", 32, "tasks that get a group per step")
	fl.IntVar(&a.nmax, "n-max", 8, "most rollouts one group attempt launches")
	fl.Float64Var(&a.lo, "ratio-min", 0.25, "lowest share of passing rollouts in a group")
	fl.Float64Var(&a.hi, "ratio-max", 0.75, "highest share of passing rollouts in a group")
	fl.IntVar(&a.version, "policy-version", 0, "version of the policy being rolled out; surplus rollouts are reused within one version")
}

func (a *adaptiveFlags) planner(n int, tasks []task) (*plan.Planner, error) {
	o := plan.Options{N: n, NMax: a.nmax, Lo: a.lo, Hi: a.hi, Batch: a.batch, Seed: a.seed,
		Confidence: 0.5, Prior: plan.Posterior{Alpha: 1, Beta: 1}}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	p := plan.New(o)
	for _, t := range tasks {
		p.AddTask(t.ID, plan.Posterior{})
	}
	return p, nil
}

// storedRollout is a finished rollout read back from the store.
type storedRollout struct {
	plan.Rollout
	run string
	res runResult
}

// history reads every finished episode of tasks from the store.
func (a *adaptiveFlags) history(cmd *cobra.Command, tasks []task) ([]storedRollout, error) {
	st, err := openReadStore(cmd, &a.store)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ctx := cmd.Context()
	var out []storedRollout
	for _, t := range tasks {
		f := recorder.Filter{TaskID: t.ID}
		for {
			page, next, err := st.ListEpisodes(ctx, f)
			if err != nil {
				return nil, fmt.Errorf("list episodes of %s: %w", t.ID, err)
			}
			for _, ep := range page {
				if ep.Status != recorder.StatusRunning {
					out = append(out, toRollout(&ep))
				}
			}
			if f.Cursor = next; next == "" {
				break
			}
		}
	}
	return out, nil
}

func toRollout(ep *recorder.EpisodeSummary) storedRollout {
	md := gjson.ParseBytes(ep.Metadata)
	r := storedRollout{run: md.Get(mdPlanRun).String()}
	r.Rollout = plan.Rollout{ID: ep.ID, TaskID: ep.TaskID, Sample: int(md.Get("sample").Int()), Step: int(md.Get(mdPlanStep).Int()),
		PolicyVersion: int(md.Get(mdPolicyVersion).Int()), Status: planStatus(ep.Status)}
	if ep.Reward != nil {
		r.Reward = *ep.Reward
	}
	r.res = runResult{TaskID: ep.TaskID, GroupID: ep.GroupID, Sample: r.Sample, EpisodeID: ep.ID, Status: ep.Status, Reward: r.Reward}
	return r
}

// planStatus maps an episode status to the planner's: an infrastructure
// error is an aborted rollout.
func planStatus(s string) plan.Status {
	switch s {
	case recorder.StatusSuccess, recorder.StatusFailure:
		return plan.StatusCompleted
	case recorder.StatusTimeout:
		return plan.StatusTimeout
	}
	return plan.StatusAborted
}

type rolloutKey struct {
	task   string
	sample int
}

// adaptiveRun is one `orchard rollout --adaptive` run.
type adaptiveRun struct {
	a       *adaptiveFlags
	tasks   map[string]task
	one     rollout.EpisodeFunc
	conc    int
	done    map[rolloutKey]storedRollout // finished in the store before this process
	mu      sync.Mutex                   // guards following
	results []runResult
	enc     *json.Encoder
}

// run drives the planner over the tasks, running each rollout the store
// does not already hold as finished, and prints the summary.
func (a *adaptiveFlags) run(cmd *cobra.Command, tasks []task, n, conc int, one rollout.EpisodeFunc, out io.Writer) error {
	if a.budget < 1 {
		return fmt.Errorf("--adaptive needs --budget of at least 1")
	}
	p, err := a.planner(n, tasks)
	if err != nil {
		return err
	}
	if a.runID == "" {
		a.runID = newRunID()
	}
	hist, err := a.history(cmd, tasks)
	if err != nil {
		return err
	}
	r := &adaptiveRun{a: a, tasks: map[string]task{}, one: one, conc: conc, done: map[rolloutKey]storedRollout{}, enc: json.NewEncoder(out)}
	for _, t := range tasks {
		r.tasks[t.ID] = t
	}
	for _, h := range hist {
		k := rolloutKey{h.TaskID, h.Sample}
		if _, dup := r.done[k]; h.run == a.runID && !dup {
			r.done[k] = h
		}
	}
	stderr := cmd.ErrOrStderr()
	fmt.Fprintf(stderr, "adaptive run %s: %d finished rollouts in the store\n", a.runID, len(r.done))
	onGroup, closeGroups, err := a.groupWriter()
	if err != nil {
		return err
	}
	err = plan.Drive(cmd.Context(), p, plan.DriveOptions{Budget: a.budget, PolicyVersion: a.version, Exec: r.exec, OnGroup: onGroup})
	if cerr := closeGroups(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	printPlanMetrics(stderr, p.Metrics())
	return printSummary(stderr, r.results)
}

// exec runs a round's rollouts, answering finished ones from the store.
func (r *adaptiveRun) exec(ctx context.Context, step int, strides []plan.Stride) ([]plan.Rollout, error) {
	var out []plan.Rollout
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.conc)
	for _, s := range strides {
		for k := range s.Count {
			sample := s.First + k
			if h, ok := r.done[rolloutKey{s.TaskID, sample}]; ok {
				out = append(out, h.Rollout)
				r.record(h.res, false)
				continue
			}
			g.Go(func() error {
				ro, err := r.runOne(gctx, step, s.TaskID, sample)
				mu.Lock()
				defer mu.Unlock()
				out = append(out, ro)
				return err
			})
		}
	}
	err := g.Wait()
	return out, err
}

func (r *adaptiveRun) runOne(ctx context.Context, step int, id string, sample int) (plan.Rollout, error) {
	t := r.tasks[id]
	md := map[string]any{mdPlanRun: r.a.runID, mdPlanStep: step, mdPolicyVersion: r.a.version}
	for k, v := range t.Metadata {
		md[k] = v
	}
	env := map[string]string{"ORCHARD_SAMPLE": strconv.Itoa(sample)}
	for k, v := range t.Env {
		env[k] = v
	}
	t.Metadata, t.Env = md, env
	res := r.one(ctx, t, sample)
	if ctx.Err() != nil {
		return plan.Rollout{}, ctx.Err()
	}
	r.record(res, true)
	return plan.Rollout{ID: res.EpisodeID, TaskID: id, Sample: sample, Step: step, PolicyVersion: r.a.version,
		Reward: res.Reward, Status: planStatus(res.Status)}, nil
}

func (r *adaptiveRun) record(res runResult, print bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, res)
	if print {
		_ = r.enc.Encode(res)
	}
}

// groupWriter returns the OnGroup that writes --groups, and its closer.
func (a *adaptiveFlags) groupWriter() (func(*plan.Group), func() error, error) {
	if a.groups == "" {
		return nil, func() error { return nil }, nil
	}
	f, err := os.Create(a.groups)
	if err != nil {
		return nil, nil, fmt.Errorf("open --groups: %w", err)
	}
	enc := json.NewEncoder(f)
	var werr error
	on := func(g *plan.Group) {
		if err := enc.Encode(g); err != nil && werr == nil {
			werr = fmt.Errorf("write --groups: %w", err)
		}
	}
	return on, func() error {
		if err := f.Close(); err != nil && werr == nil {
			werr = fmt.Errorf("write --groups: %w", err)
		}
		return werr
	}, nil
}

func printPlanMetrics(w io.Writer, m plan.Metrics) {
	fmt.Fprintf(w, "planner: %d groups from %d rollouts (%.2f per group), degenerate %d of %d attempts (%.3f), "+
		"recycled %d, surplus %d, wasted %d, Brier %.4f\n",
		m.Groups, m.Rollouts, m.RolloutsPerGroup, m.Degenerate, m.Groups+m.Degenerate, m.DegenerateRate,
		m.Recycled, m.Surplus, m.Wasted, m.Brier)
}

func newRunID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "run-" + hex.EncodeToString(b)
}

func newRolloutPlanCmd() *cobra.Command {
	var a adaptiveFlags
	var tasksPath string
	var n, step int
	cmd := &cobra.Command{
		Use:   "plan --tasks tasks.jsonl",
		Short: "Print the next step's rollout plan from the outcomes in the store",
		Long: `Plan reads every finished episode of the tasks from the store into the planner (a Beta
posterior per task, surplus rollouts of a policy version within one) and prints, as JSON, the
strides of the next step (task -> rollouts to run) and every task's state.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tasks, err := readTasks(tasksPath)
			if err != nil {
				return err
			}
			p, err := a.planner(n, tasks)
			if err != nil {
				return err
			}
			hist, err := a.history(cmd, tasks)
			if err != nil {
				return err
			}
			for _, h := range hist {
				_ = p.Absorb(h.Rollout) // the history holds only these tasks
			}
			strides := p.Begin(step, a.version)
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(map[string]any{"step": step, "strides": strides, "tasks": p.Tasks()})
		},
	}
	a.register(cmd, false)
	cmd.Flags().StringVar(&tasksPath, "tasks", "", "tasks file, one JSON object per line (required)")
	cmd.Flags().IntVar(&n, "n", 4, "group size")
	cmd.Flags().IntVar(&step, "step", 0, "step number of the plan")
	_ = cmd.MarkFlagRequired("tasks")
	return cmd
}
