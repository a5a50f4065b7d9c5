package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/client"
	"github.com/orchard-rl/orchard/envd/local"
)

func init() { subcommands = append(subcommands, newRunCmd) }

// sandboxFlags pick the envd to use (a remote one, or an embedded local
// one) and shape the sandboxes; run and rollout share them.
type sandboxFlags struct {
	envdURL, envdToken string
	proxy, adminToken  string
	stateDir           string
	image, workdir     string
	network            string
	env                []string
	timeout, vTimeout  time.Duration
	verifier           string
	noEpisode          bool
}

func (f *sandboxFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.envdURL, "envd", envOr("ORCHARD_ENVD_URL", ""), "envd base URL (env ORCHARD_ENVD_URL; default: an embedded local envd)")
	fs.StringVar(&f.envdToken, "envd-token", envOr("ORCHARD_ENVD_TOKEN", ""), "envd bearer token (env ORCHARD_ENVD_TOKEN)")
	fs.StringVar(&f.proxy, "proxy", envOr("ORCHARD_PROXY_URL", ""), "embedded envd: recording proxy base URL that opens the episodes (env ORCHARD_PROXY_URL)")
	fs.StringVar(&f.adminToken, "admin-token", envOr("ORCHARD_ADMIN_TOKEN", ""), "embedded envd: proxy admin token (env ORCHARD_ADMIN_TOKEN)")
	fs.StringVar(&f.stateDir, "state-dir", "", "embedded envd: state directory (default $TMPDIR/orchard-envd)")
	fs.StringVar(&f.image, "image", "", "sandbox image (local: an OCI image layout, a docker save tarball or a root filesystem directory; default a minimal read-only root from the host's system directories)")
	fs.StringVar(&f.workdir, "workdir", "/work", "sandbox work directory; the task directory is copied here")
	fs.StringVar(&f.network, "network", "proxy", "sandbox network: proxy (loopback plus the episode's model routes), none or host (everything the host reaches)")
	fs.StringArrayVar(&f.env, "env", nil, "KEY=VALUE added to the harness and verifier env (repeatable)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Minute, "harness time limit; its process group is killed after it")
	fs.DurationVar(&f.vTimeout, "verifier-timeout", 10*time.Minute, "verifier time limit")
	fs.StringVar(&f.verifier, "verifier", "", `shell command run after the harness; its last stdout line, if a number, is the reward, else exit 0 means 1 and anything else 0`)
	fs.BoolVar(&f.noEpisode, "no-episode", false, "do not open an episode (no proxy wiring)")
}

// connect returns a client for the configured envd, starting an embedded
// one when --envd is empty; stop shuts the embedded one down.
func (f *sandboxFlags) connect(ctx context.Context, lg *slog.Logger) (c *client.Client, stop func() error, err error) {
	if f.envdURL != "" {
		return client.New(client.Options{BaseURL: f.envdURL, Token: f.envdToken}), func() error { return nil }, nil
	}
	cfg := &envdConfig{Listen: "127.0.0.1:0", Backend: "local", Proxy: f.proxy, AdminToken: f.adminToken, Token: randomToken(),
		DefaultTTL: time.Hour, MaxTTL: 7 * 24 * time.Hour, IdleTimeout: time.Hour,
		Local: localOptions(f.stateDir)}
	ectx, cancel := context.WithCancel(ctx)
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- runEnvd(ectx, cfg, lg, ready) }()
	select {
	case addr := <-ready:
		stop = func() error { cancel(); return <-done }
		return client.New(client.Options{BaseURL: "http://" + addr, Token: cfg.Token}), stop, nil
	case err := <-done:
		cancel()
		return nil, nil, fmt.Errorf("start embedded envd: %w", err)
	}
}

// task is one task to run: where its files are and what it says.
type task struct {
	ID       string            `json:"task_id"`
	Dir      string            `json:"dir,omitempty"`
	Prompt   string            `json:"prompt,omitempty"`
	Verifier string            `json:"verifier,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Metadata map[string]any    `json:"metadata,omitempty"`
}

// runResult is one line of `orchard run`/`rollout` output.
type runResult struct {
	TaskID       string  `json:"task_id"`
	GroupID      string  `json:"group_id,omitempty"`
	Sample       int     `json:"sample"`
	SandboxID    string  `json:"sandbox_id,omitempty"`
	EpisodeID    string  `json:"episode_id,omitempty"`
	Status       string  `json:"status"`
	Reward       float64 `json:"reward"`
	HarnessExit  int     `json:"harness_exit"`
	VerifierExit *int    `json:"verifier_exit,omitempty"`
	DurationMS   int64   `json:"duration_ms"`
	Error        string  `json:"error,omitempty"`
}

// runEpisode runs one harness attempt at t end to end: sandbox with
// episode, task files in, harness, verifier, outcome posted as the reward,
// sandbox deleted. Harness output goes to out. Failures of the
// infrastructure come back as status "error" with Error set.
func runEpisode(ctx context.Context, c *client.Client, f *sandboxFlags, t task, group string, sample int, harness []string, out io.Writer) runResult {
	start := time.Now()
	res := runResult{TaskID: t.ID, GroupID: group, Sample: sample, Status: "error"}
	env := map[string]string{"ORCHARD_TASK_ID": t.ID, "ORCHARD_TASK_PROMPT": t.Prompt}
	for _, kv := range f.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for k, v := range t.Env {
		env[k] = v
	}
	spec := envd.Spec{Image: f.image, Workdir: f.workdir, Network: f.network, Env: env,
		TTL: envd.Duration(f.timeout + f.vTimeout + 5*time.Minute)}
	if !f.noEpisode {
		md := map[string]any{"harness": harness[0], "sample": sample}
		for k, v := range t.Metadata {
			md[k] = v
		}
		spec.Episode = &envd.EpisodeSpec{TaskID: t.ID, GroupID: group, Metadata: md}
	}
	sb, err := c.Create(ctx, spec)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer sb.Close()
	res.SandboxID, res.EpisodeID = sb.ID(), sb.Info.EpisodeID
	outcome := execute(ctx, sb, f, t, harness, out, &res)
	res.DurationMS = time.Since(start).Milliseconds()
	outcome.Info["duration_ms"] = res.DurationMS
	if _, err := sb.Finish(context.WithoutCancel(ctx), outcome); err != nil && res.Error == "" {
		res.Status, res.Error = "error", err.Error()
	}
	return res
}

// execute copies the task in, runs the harness and the verifier, fills
// res and returns the outcome to post.
func execute(ctx context.Context, sb *client.Sandbox, f *sandboxFlags, t task, harness []string, out io.Writer, res *runResult) envd.Outcome {
	fail := func(err error) envd.Outcome {
		res.Status, res.Error = "error", err.Error()
		return envd.Outcome{Status: "error", Info: map[string]any{"error": err.Error()}}
	}
	if t.Dir != "" {
		if err := sb.UploadDir(ctx, t.Dir, f.workdir); err != nil {
			return fail(err)
		}
	}
	argv := make([]string, len(harness))
	for i, a := range harness {
		argv[i] = strings.NewReplacer("{prompt}", t.Prompt, "{task_id}", t.ID).Replace(a)
	}
	hr, err := streamExec(ctx, sb, envd.ExecRequest{Cmd: argv, Timeout: envd.Duration(f.timeout)}, out)
	if err != nil {
		return fail(fmt.Errorf("harness: %w", err))
	}
	res.HarnessExit = hr.ExitCode
	info := map[string]any{"harness_exit": hr.ExitCode, "harness_timed_out": hr.TimedOut}
	if hr.TimedOut {
		res.Status, res.Reward = "timeout", 0
		return envd.Outcome{Status: "timeout", Info: info}
	}
	verifier := f.verifier
	if t.Verifier != "" {
		verifier = t.Verifier
	}
	if verifier == "" {
		res.Reward = boolReward(hr.ExitCode == 0)
	} else {
		vr, err := sb.Exec(ctx, envd.ExecRequest{Shell: verifier, Timeout: envd.Duration(f.vTimeout)})
		if err != nil {
			return fail(fmt.Errorf("verifier: %w", err))
		}
		res.VerifierExit = &vr.ExitCode
		res.Reward = verifierReward(vr)
		info["verifier_exit"], info["verifier_stdout"] = vr.ExitCode, tail(vr.Stdout, 2048)
	}
	res.Status = "failure"
	if res.Reward > 0 {
		res.Status = "success"
	}
	return envd.Outcome{Reward: res.Reward, Status: res.Status, Info: info}
}

// streamExec runs req as a stream, copying output to out as it comes.
func streamExec(ctx context.Context, sb *client.Sandbox, req envd.ExecRequest, out io.Writer) (*envd.ExecResult, error) {
	st, err := sb.ExecStream(ctx, req)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	for {
		ev, err := st.Next()
		if err != nil {
			return nil, err
		}
		switch ev.Type {
		case envd.EventStdout, envd.EventStderr:
			_, _ = out.Write(ev.Bytes())
		case envd.EventEnd:
			return ev.Result, nil
		}
	}
}

// verifierReward is the number on the verifier's last stdout line, or
// 1/0 by its exit code.
func verifierReward(r *envd.ExecResult) float64 {
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if v, err := strconv.ParseFloat(strings.TrimSpace(lines[len(lines)-1]), 64); err == nil {
		return v
	}
	return boolReward(r.ExitCode == 0)
}

func boolReward(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func newRunCmd() *cobra.Command {
	var f sandboxFlags
	var t task
	var group string
	cmd := &cobra.Command{
		Use:   "run [flags] -- HARNESS [ARGS...]",
		Short: "Run one unmodified harness command in a sandbox wired to the proxy, then score it",
		Long: `Create an episode and a sandbox, copy --task-dir into the work directory, run the harness
with the episode's OPENAI_*/ANTHROPIC_* env injected, run --verifier, post its outcome as the
episode's reward and delete the sandbox. "{prompt}" and "{task_id}" in the harness arguments are
replaced. Harness output goes to stderr; one JSON result line goes to stdout. Exit status: 0 when
the outcome is success, 3 when it is failure or timeout, 1 on errors.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if t.ID == "" {
				return fmt.Errorf("--task-id is required")
			}
			lg := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			c, stop, err := f.connect(cmd.Context(), lg)
			if err != nil {
				return err
			}
			res := runEpisode(cmd.Context(), c, &f, t, group, 0, args, cmd.ErrOrStderr())
			if err := stop(); err != nil {
				lg.Warn("embedded envd", "err", err)
			}
			if err := json.NewEncoder(cmd.OutOrStdout()).Encode(res); err != nil {
				return err
			}
			switch res.Status {
			case "success":
				return nil
			case "error":
				return fmt.Errorf("run %s: %s", t.ID, res.Error)
			}
			return exitError{code: 3}
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&t.ID, "task-id", "", "task id of the episode (required)")
	cmd.Flags().StringVar(&group, "group-id", "", "group id of the episode (e.g. the GRPO group)")
	cmd.Flags().StringVar(&t.Dir, "task-dir", "", "local directory copied into the sandbox work directory")
	cmd.Flags().StringVar(&t.Prompt, "prompt", "", "task text: replaces {prompt} in the harness args and is in $ORCHARD_TASK_PROMPT")
	return cmd
}

// localOptions are the local backend options of an embedded envd.
func localOptions(stateDir string) local.Options {
	return local.Options{StateDir: stateDir, Network: "proxy"}
}

// randomToken guards an embedded envd's loopback port against other local
// users.
func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
