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
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/orchard-rl/orchard/envd/client"
	"github.com/orchard-rl/orchard/envd/local"
	"github.com/orchard-rl/orchard/internal/cliconf"
	"github.com/orchard-rl/orchard/rl/rollout"
)

// sandboxFlags pick the envd to use (a remote one, or an embedded local
// one) and shape the sandboxes; run and rollout share them.
type sandboxFlags struct {
	envdURL, envdToken string
	proxy, adminToken  string
	stateDir           string
	env                []string
	opts               rollout.Options
}

func (f *sandboxFlags) register(fs *pflag.FlagSet) {
	d := rollout.Defaults()
	fs.StringVar(&f.envdURL, "envd", "", "envd base URL (default: an embedded local envd)")
	fs.StringVar(&f.envdToken, "envd-token", "", "envd bearer token")
	fs.StringVar(&f.proxy, "proxy", "", "embedded envd: recording proxy base URL that opens the episodes")
	fs.StringVar(&f.adminToken, "admin-token", "", "embedded envd: proxy admin token")
	fs.StringVar(&f.stateDir, "state-dir", "", "embedded envd: state directory (default $TMPDIR/orchard-envd)")
	fs.StringVar(&f.opts.Image, "image", d.Image, "sandbox image (local: an OCI image layout, a docker save tarball or a root filesystem directory; default a minimal read-only root from the host's system directories)")
	fs.StringVar(&f.opts.Workdir, "workdir", d.Workdir, "sandbox work directory; the task directory is copied here")
	fs.StringVar(&f.opts.Network, "network", d.Network, "sandbox network: proxy (loopback plus the episode's model routes), none or host (everything the host reaches)")
	fs.StringArrayVar(&f.env, "env", nil, "KEY=VALUE added to the harness and verifier env (repeatable)")
	fs.DurationVar(&f.opts.Timeout, "timeout", d.Timeout, "harness time limit; its process group is killed after it")
	fs.DurationVar(&f.opts.VerifierTimeout, "verifier-timeout", d.VerifierTimeout, "verifier time limit")
	fs.StringVar(&f.opts.Verifier, "verifier", d.Verifier, `shell command run after the harness; its last stdout line, if a number, is the reward, else exit 0 means 1 and anything else 0`)
	fs.BoolVar(&f.opts.NoEpisode, "no-episode", false, "do not open an episode (no proxy wiring)")
	cliconf.SetEnv(fs, "envd", "ORCHARD_ENVD_URL")
	cliconf.SetEnv(fs, "proxy", "ORCHARD_PROXY_URL")
	cliconf.SetEnv(fs, "state-dir", "ORCHARD_ENVD_STATE")
	cliconf.EnvOnly(fs, "envd-token")
	cliconf.EnvOnly(fs, "admin-token")
}

// runner returns a runner of harness on envd c, harness output to out.
func (f *sandboxFlags) runner(c rollout.Envd, harness []string, out io.Writer) *rollout.Runner {
	o := f.opts
	o.Envd, o.Harness, o.Output, o.Env = c, harness, out, map[string]string{}
	for _, kv := range f.env {
		k, v, _ := strings.Cut(kv, "=")
		o.Env[k] = v
	}
	return rollout.New(o)
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

// task and runResult are the rollout package's, named as the CLI's
// callers know them.
type (
	task      = rollout.Task
	runResult = rollout.Result
)

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
			res := f.runner(c, args, cmd.ErrOrStderr()).Episode(cmd.Context(), t, group, 0)
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
