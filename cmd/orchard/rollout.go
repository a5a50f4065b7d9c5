package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"sync"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
)

func init() { subcommands = append(subcommands, newRolloutCmd) }

func newRolloutCmd() *cobra.Command {
	var f sandboxFlags
	var tasksPath, outPath string
	var n, concurrency int
	var quiet bool
	var ad adaptiveFlags
	cmd := &cobra.Command{
		Use:   "rollout --tasks tasks.jsonl [--n 8] [--concurrency 64] -- HARNESS [ARGS...]",
		Short: "Run a harness N times on every task, in parallel sandboxes, and summarize the rewards",
		Long: `Each line of --tasks is a JSON object {"task_id", "dir", "prompt", "verifier", "env",
"metadata"}; only task_id is required. Every task runs --n times (one episode each, all in
group task_id) with at most --concurrency at once, exactly like "orchard run". Result lines go to
--out (default stdout), a progress bar and a summary to stderr. "{prompt}" and "{task_id}" in the
harness arguments are replaced per task.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 || concurrency < 1 {
				return fmt.Errorf("--n and --concurrency must be at least 1")
			}
			tasks, err := readTasks(tasksPath)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if outPath != "" {
				fo, err := os.Create(outPath)
				if err != nil {
					return fmt.Errorf("open --out: %w", err)
				}
				defer fo.Close()
				out = fo
			}
			lg := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			c, stop, err := f.connect(cmd.Context(), lg)
			if err != nil {
				return err
			}
			defer stop()
			one := func(ctx context.Context, t task, s int) runResult {
				return runEpisode(ctx, c, &f, t, t.ID, s, args, io.Discard)
			}
			if ad.on {
				return ad.run(cmd, tasks, n, concurrency, one, out)
			}
			var bar *progressbar.ProgressBar
			if !quiet {
				bar = progressbar.Default(int64(len(tasks)*n), "rollout")
			}
			results := rollout(cmd.Context(), tasks, n, concurrency, one, out, bar)
			return printSummary(cmd.ErrOrStderr(), results)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&tasksPath, "tasks", "", "tasks file, one JSON object per line (required)")
	cmd.Flags().StringVar(&outPath, "out", "", "write result lines here instead of stdout")
	cmd.Flags().IntVar(&n, "n", 8, "samples (episodes) per task")
	cmd.Flags().IntVar(&concurrency, "concurrency", 64, "sandboxes running at once")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "no progress bar")
	_ = cmd.MarkFlagRequired("tasks")
	ad.register(cmd, true)
	cmd.AddCommand(newRolloutPlanCmd())
	return cmd
}

// readTasks parses a JSONL tasks file, naming the line of any error.
func readTasks(path string) ([]task, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open tasks: %w", err)
	}
	defer fh.Close()
	var tasks []task
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var t task
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if t.ID == "" {
			return nil, fmt.Errorf("%s:%d: task_id is required", path, line)
		}
		tasks = append(tasks, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("%s: no tasks", path)
	}
	return tasks, nil
}

// rollout runs every (task, sample) with at most conc at once, writing
// each result line to out as it finishes.
func rollout(ctx context.Context, tasks []task, n, conc int, one func(context.Context, task, int) runResult, out io.Writer, bar *progressbar.ProgressBar) []runResult {
	var mu sync.Mutex
	var results []runResult
	enc := json.NewEncoder(out)
	g := new(errgroup.Group)
	g.SetLimit(conc)
	for _, t := range tasks {
		for s := range n {
			if ctx.Err() != nil {
				break
			}
			g.Go(func() error {
				r := one(ctx, t, s)
				mu.Lock()
				defer mu.Unlock()
				results = append(results, r)
				_ = enc.Encode(r)
				if bar != nil {
					_ = bar.Add(1)
				}
				return nil
			})
		}
	}
	_ = g.Wait()
	return results
}

// printSummary writes counts per status and the mean reward per task; it
// fails when any episode ended in error.
func printSummary(w io.Writer, results []runResult) error {
	status := map[string]int{}
	sum, cnt := map[string]float64{}, map[string]int{}
	for _, r := range results {
		status[r.Status]++
		sum[r.TaskID] += r.Reward
		cnt[r.TaskID]++
	}
	fmt.Fprintf(w, "\n%d episodes: %d success, %d failure, %d timeout, %d error\n",
		len(results), status["success"], status["failure"], status["timeout"], status["error"])
	ids := make([]string, 0, len(sum))
	for id := range sum {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(w, "  %-30s mean reward %s over %d\n", id, strconv.FormatFloat(sum[id]/float64(cnt[id]), 'f', 3, 64), cnt[id])
	}
	if status["error"] > 0 {
		return exitError{code: 1}
	}
	return nil
}
