package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/orchard-rl/orchard/rl/rollout"
)

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
			f.opts.N, f.opts.Concurrency = n, concurrency
			r := f.runner(c, args, io.Discard)
			if ad.on {
				return ad.run(cmd, tasks, n, concurrency, r.Sample, out)
			}
			results := r.Rollout(cmd.Context(), tasks, printResult(out, len(tasks)*n, quiet))
			return printSummary(cmd.ErrOrStderr(), results)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&tasksPath, "tasks", "", "tasks file, one JSON object per line (required)")
	cmd.Flags().StringVar(&outPath, "out", "", "write result lines here instead of stdout")
	cmd.Flags().IntVar(&n, "n", rollout.Defaults().N, "samples (episodes) per task")
	cmd.Flags().IntVar(&concurrency, "concurrency", rollout.Defaults().Concurrency, "sandboxes running at once")
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

// printResult returns the callback that writes each result line to out
// and moves the progress bar (none when quiet).
func printResult(out io.Writer, total int, quiet bool) func(runResult) {
	enc := json.NewEncoder(out)
	var bar *progressbar.ProgressBar
	if !quiet {
		bar = progressbar.Default(int64(total), "rollout")
	}
	return func(r runResult) {
		_ = enc.Encode(r)
		if bar != nil {
			_ = bar.Add(1)
		}
	}
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
