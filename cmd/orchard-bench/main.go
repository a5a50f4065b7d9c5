// Command orchard-bench loads a scripted vLLM-style upstream, a bare
// reverse proxy and orchard proxy side by side and reports what the proxy
// costs (docs/benchmarks.md). It is test scaffolding, kept out of the
// orchard binary.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchard-rl/orchard/internal/cliconf"
	"github.com/orchard-rl/orchard/internal/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newBenchCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		if !errors.Is(err, errStreamsFailed) {
			fmt.Fprintln(os.Stderr, "orchard-bench:", err)
		}
		os.Exit(1)
	}
}

// errStreamsFailed is returned, after the table is printed, when any stream
// failed.
var errStreamsFailed = errors.New("some streams failed")

func newBenchCmd() *cobra.Command {
	cfg := loadgen.Config{Scenario: loadgen.Scenario{}}
	var out string
	var long bool
	cmd := &cobra.Command{
		Use:           "orchard-bench",
		Short:         "Load the upstream, a bare reverse proxy and orchard proxy side by side",
		SilenceUsage:  true,
		SilenceErrors: true,
		Long: `Start a scripted vLLM-style upstream, then load, one after the other and each in a fresh
process: (a) the upstream directly, (b) a bare httputil.ReverseProxy, (b+ids) the same with a
client that asks for token ids and logprobs itself (the token path's floor), (c) orchard proxy on
the embedded store, (d) on Redis, (e) (d) with --upstream-kind vllm, (f) (c) with --upstream-kind
vllm, at each --concurrency (closed loop) and once at --rate (open loop). With --baseline-bin, each
selected orchard target also runs on that binary (c', f', ...) right after its original. Prints a
table, writes --out-dir/<time>.json, and exits 1 if any stream failed. The default run takes about 5
minutes (7 with Redis); --long runs 20s cells twice. A quick side-by-side with the previous
commit's binary (about 3 minutes):

  git worktree add /tmp/base HEAD~1 && (cd /tmp/base && go build -o /tmp/orchard-base ./cmd/orchard)
  bin/orchard-bench --baseline-bin /tmp/orchard-base --targets b,b+ids,c,f --concurrency 1,8,64 \
    --warmup 1s --duration 3s --rate 0 --out-dir ""`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if long {
				fl := cmd.Flags()
				if !fl.Changed("duration") {
					cfg.Duration = 20 * time.Second
				}
				if !fl.Changed("warmup") {
					cfg.Warmup = 2 * time.Second
				}
				if !fl.Changed("rounds") {
					cfg.Rounds = 2
				}
			}
			return runBench(cmd, cfg, out)
		},
	}
	fl := cmd.Flags()
	sc := &cfg.Scenario
	fl.StringVar(&out, "out-dir", "docs/bench", "directory for the results JSON (empty: none)")
	cliconf.Alias(fl, "out", "out-dir") // --out names a file in every other command
	fl.BoolVar(&long, "long", false, "20s cells, 2s warmup, 2 rounds (about 15 minutes)")
	fl.StringVar(&cfg.Bin, "bin", "", "orchard binary to run the proxies with (default: orchard beside this binary)")
	fl.StringVar(&cfg.BaselineBin, "baseline-bin", "", "a second orchard binary (say, from the previous commit) to run each orchard target on as well (c', f', ...)")
	fl.StringVar(&cfg.RedisServer, "redis-server", "", "redis-server binary (default: from PATH)")
	fl.StringVar(&cfg.CPUProfiles, "cpu-profiles", "", "directory for a CPU profile of each orchard proxy over each measured window (target-modeclients-rround.pprof; empty: none)")
	fl.StringVar(&cfg.WorkDir, "work-dir", "", "keep stores and process logs here (default: a temporary directory, removed)")
	fl.StringSliceVar(&cfg.Targets, "targets", loadgen.TargetKeys(), "targets to run: a upstream, b bare, b+ids bare-ids, c orchard, d orchard-redis, e orchard-redis-vllm, f orchard-vllm")
	fl.IntSliceVar(&cfg.Concurrency, "concurrency", []int{1, 8, 64, 256}, "closed-loop client counts")
	fl.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "warm-up per cell")
	fl.DurationVar(&cfg.Duration, "duration", 6*time.Second, "measured window per cell")
	fl.IntVar(&cfg.Rounds, "rounds", 1, "repeat the sweep, alternating target order, and merge")
	fl.Float64Var(&cfg.OpenRate, "rate", 50, "open-loop requests per second, one cell per target (0: skip)")
	fl.DurationVar(&cfg.OpenDuration, "open-duration", 0, "open-loop window (default: --duration)")
	fl.IntVar(&sc.Turns, "turns", 8, "calls per agent episode")
	fl.IntVar(&sc.PromptMin, "prompt-min", 2048, "request bytes of the first turn")
	fl.IntVar(&sc.PromptMax, "prompt-max", 8192, "request bytes of the last turn (about)")
	fl.IntVar(&sc.ChunksMin, "chunks-min", 50, "fewest token events per response")
	fl.IntVar(&sc.ChunksMax, "chunks-max", 500, "most token events per response")
	fl.IntVar(&sc.ChunkBytes, "chunk-bytes", 4, "text bytes per token event")
	fl.DurationVar(&sc.FirstByteDelay, "first-byte-delay", 0, "upstream delay before the response headers")
	fl.DurationVar(&sc.ChunkDelay, "chunk-delay", 0, "upstream delay between events")
	fl.BoolVar(&sc.NoLogprobs, "no-logprobs", false, "the upstream ignores logprobs (token ids only on the token path), as in results before it honoured them")
	fl.BoolVar(&sc.Lifecycle, "lifecycle", false, "closed-loop clients of orchard targets create each episode through the episode API before its first turn and finish it after its last, as a rollout does")
	cmd.AddCommand(newBenchUpstreamCmd(), newBenchBareCmd())
	return cmd
}

func runBench(cmd *cobra.Command, cfg loadgen.Config, out string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	cfg.BenchBin = exe
	if cfg.Bin == "" {
		cfg.Bin = filepath.Join(filepath.Dir(exe), "orchard")
	}
	if _, err := os.Stat(cfg.Bin); err != nil {
		return fmt.Errorf("orchard binary (--bin): %w", err)
	}
	if cfg.BaselineBin != "" {
		if cfg.BaselineBin, err = filepath.Abs(cfg.BaselineBin); err != nil {
			return fmt.Errorf("baseline binary (--baseline-bin): %w", err)
		}
		if _, err := os.Stat(cfg.BaselineBin); err != nil {
			return fmt.Errorf("baseline binary (--baseline-bin): %w", err)
		}
	}
	cfg.Progress = cmd.ErrOrStderr()
	rep, err := loadgen.RunSuite(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	if err := rep.WriteTable(cmd.OutOrStdout()); err != nil {
		return err
	}
	if out != "" {
		path, err := rep.WriteJSON(out)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "\nresults: %s\n", path)
	}
	if rep.Failed() {
		fmt.Fprintln(cmd.ErrOrStderr(), "orchard-bench: some streams failed (see the err and trunc columns)")
		return errStreamsFailed
	}
	return nil
}

// newBenchUpstreamCmd is the benchmark's upstream process.
func newBenchUpstreamCmd() *cobra.Command {
	var listen, scenario string
	cmd := &cobra.Command{
		Use:    "upstream",
		Short:  "Serve the benchmark's scripted vLLM-style upstream",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sc, err := loadgen.ParseScenario(scenario)
			if err != nil {
				return err
			}
			return loadgen.ServeUpstream(cmd.Context(), listen, sc)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8000", "address to serve on")
	cmd.Flags().StringVar(&scenario, "scenario", "", "scenario as JSON (default: the default scenario)")
	return cmd
}

// newBenchBareCmd is the bare reverse proxy the recording proxy is
// compared with.
func newBenchBareCmd() *cobra.Command {
	var listen, upstream string
	cmd := &cobra.Command{
		Use:    "bare-proxy",
		Short:  "Serve a bare httputil.ReverseProxy (FlushInterval -1), the benchmark's floor",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return loadgen.ServeBare(cmd.Context(), listen, upstream)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8081", "address to serve on")
	cmd.Flags().StringVar(&upstream, "upstream", "http://127.0.0.1:8000", "upstream base URL (without /v1)")
	return cmd
}
