package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/kube"
	"github.com/orchard-rl/orchard/envd/local"
	"github.com/orchard-rl/orchard/internal/cliconf"
)

// envdConfig is the configuration of `orchard envd`: flags, each also an
// environment variable and a --config key (settings.go); the env names
// noted are the ones that differ from ORCHARD_<FLAG>.
type envdConfig struct {
	Listen       string        // address; env ORCHARD_ENVD_LISTEN; default 127.0.0.1:7000
	Backend      string        // local|kubernetes; default local
	Proxy        string        // proxy base URL for episodes; env ORCHARD_PROXY_URL
	AdminToken   string        // proxy admin token; env ORCHARD_ADMIN_TOKEN
	Token        string        // token clients must send to envd; env ORCHARD_ENVD_TOKEN
	DefaultTTL   time.Duration // default 1h
	MaxTTL       time.Duration // default 24h
	IdleTimeout  time.Duration // default 15m; env ORCHARD_ENVD_IDLE_TIMEOUT
	MaxSandboxes int           // default envd.DefaultMaxSandboxes; negative = no cap
	PrintJail    bool          // print the local jail's mounts and exit
	Local        local.Options
	Kube         kubeFlags
}

func (c *envdConfig) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:7000", "address to serve the sandbox API on")
	fs.StringVar(&c.Backend, "backend", "local", "sandbox backend: local (bubblewrap) or kubernetes")
	fs.StringVar(&c.Proxy, "proxy", "", "recording proxy base URL; sandboxes with an episode get its credentials")
	fs.StringVar(&c.AdminToken, "admin-token", "", "proxy admin token for the episode API")
	fs.StringVar(&c.Token, "token", "", "bearer token clients must send (empty: one is generated and logged on a loopback address, required on any other)")
	fs.DurationVar(&c.DefaultTTL, "default-ttl", time.Hour, "lifetime of sandboxes whose spec gives no ttl")
	fs.DurationVar(&c.MaxTTL, "max-ttl", 24*time.Hour, "largest ttl a spec may ask for")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", 15*time.Minute, "reap sandboxes without requests for this long")
	fs.IntVar(&c.MaxSandboxes, "max-sandboxes", envd.DefaultMaxSandboxes, "cap on live sandboxes (negative: none)")
	fs.BoolVar(&c.PrintJail, "print-jail", false, "local backend: print the mounts of a default sandbox's jail and exit")
	fs.StringVar(&c.Local.StateDir, "state-dir", "", "local backend: state directory (default $TMPDIR/orchard-envd)")
	fs.StringVar(&c.Local.Network, "network", envd.NetworkProxy, "default sandbox network: proxy (loopback plus the episode's model routes, bridged by envd), none, or host (everything the host reaches)")
	fs.StringVar(&c.Local.CgroupParent, "cgroup-parent", "orchard-envd", `local backend: parent cgroup name ("-" disables cgroups)`)
	fs.BoolVar(&c.Local.NoUserNS, "no-userns", false, "local backend: do not use a user namespace")
	c.Kube.register(fs)
	// envd often shares an environment with the proxy: its own server
	// settings get their own names.
	cliconf.SetEnv(fs, "listen", "ORCHARD_ENVD_LISTEN")
	cliconf.SetEnv(fs, "idle-timeout", "ORCHARD_ENVD_IDLE_TIMEOUT")
	cliconf.SetEnv(fs, "token", "ORCHARD_ENVD_TOKEN")
	cliconf.SetEnv(fs, "state-dir", "ORCHARD_ENVD_STATE")
	cliconf.SetEnv(fs, "proxy", "ORCHARD_PROXY_URL")
	cliconf.EnvOnly(fs, "token")
	cliconf.EnvOnly(fs, "admin-token")
}

func newEnvdCmd() *cobra.Command {
	var cfg envdConfig
	cmd := &cobra.Command{
		Use:   "envd",
		Short: "Serve the sandbox API (local bubblewrap jails or Kubernetes pods)",
		Long: `Serve the sandbox API documented in docs/envd.md. Each sandbox runs unmodified commands;
a sandbox created with an "episode" gets the proxy's episode credentials (OPENAI_BASE_URL,
OPENAI_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, ORCHARD_EPISODE_ID) in every exec.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.PrintJail {
				return printJail(cmd.OutOrStdout(), &cfg)
			}
			lg := slog.New(slog.NewTextHandler(os.Stderr, nil))
			limitMemory(lg)
			return runEnvd(cmd.Context(), &cfg, lg, nil)
		},
	}
	cfg.register(cmd.Flags())
	return cmd
}

// newManager builds the backend and the manager of cfg.
func newManager(ctx context.Context, cfg *envdConfig, lg *slog.Logger) (*envd.Manager, func() error, error) {
	opts := envd.Options{BackendName: cfg.Backend, DefaultTTL: cfg.DefaultTTL, MaxTTL: cfg.MaxTTL,
		IdleTimeout: cfg.IdleTimeout, MaxSandboxes: cfg.MaxSandboxes, Network: cfg.Local.Network, Logger: lg}
	if cfg.Proxy != "" {
		opts.Episodes = envd.NewEpisodeClient(cfg.Proxy, cfg.AdminToken, nil)
	}
	cleanup := func() error { return nil }
	switch cfg.Backend {
	case "local":
		cfg.Local.Logger = lg
		b, err := local.New(cfg.Local)
		if err != nil {
			return nil, nil, err
		}
		opts.Backend = b
	case "kubernetes", "kube", "k8s":
		b, stop, err := cfg.Kube.backend(ctx, lg)
		if err != nil {
			return nil, nil, err
		}
		opts.Backend, cleanup = b, stop
	default:
		return nil, nil, fmt.Errorf("--backend %q: want local or kubernetes", cfg.Backend)
	}
	return envd.NewManager(opts), cleanup, nil
}

// runEnvd serves until ctx is done, then deletes every sandbox it owns.
// ready, if not nil, receives the listening address.
func runEnvd(ctx context.Context, cfg *envdConfig, lg *slog.Logger, ready chan<- string) (err error) {
	if err := ensureToken(cfg, lg); err != nil {
		return err
	}
	m, cleanup, err := newManager(ctx, cfg, lg)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := cleanup(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close backend: %w", cerr))
		}
	}()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	api, closeAPI := withOrchardEnv(envd.NewServer(envd.ServerOptions{Manager: m, Token: cfg.Token, Logger: lg}), m, cfg, lg)
	defer closeAPI()
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 30 * time.Second}
	lg.Info("envd listening", "addr", ln.Addr().String(), "backend", cfg.Backend)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve envd: %w", err)
		}
		return nil
	})
	g.Go(func() error { return m.Start(gctx) })
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return g.Wait()
}

// kubeFlags configure the Kubernetes backend.
type kubeFlags struct {
	kubeconfig, namespace, agentImage, runtimeClass, owner, warmImage, execVia string
	warmSize                                                                   int
}

func (k *kubeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "kubernetes backend: kubeconfig file (default: in-cluster config)")
	fs.StringVar(&k.namespace, "namespace", "orchard-sandboxes", "kubernetes backend: namespace of sandbox pods")
	fs.StringVar(&k.agentImage, "agent-image", "", "kubernetes backend: image with a static orchard binary at /orchard")
	fs.StringVar(&k.runtimeClass, "runtime-class", "", "kubernetes backend: runtimeClassName of sandbox pods (gVisor, Kata)")
	fs.StringVar(&k.owner, "owner", "envd", "kubernetes backend: owner label value; the orphan sweep only touches pods with it")
	fs.IntVar(&k.warmSize, "warm-pool", 0, "kubernetes backend: ready pods kept per pod template (0: no warm pool)")
	fs.StringVar(&k.warmImage, "warm-image", "", "kubernetes backend: image to pre-warm at start (with --warm-pool)")
	fs.StringVar(&k.execVia, "exec-via", kube.ExecViaAuto, "kubernetes backend: how execs reach a pod: auto (the agent on the pod IP, the API server's pods/exec when the agent cannot be reached), agent, apiserver")
	cliconf.SetEnv(fs, "kubeconfig", "ORCHARD_KUBECONFIG", "KUBECONFIG")
	cliconf.SetEnv(fs, "namespace", "ORCHARD_ENVD_NAMESPACE")
}

// backend connects to the API server and starts the Kubernetes backend.
func (k *kubeFlags) backend(ctx context.Context, lg *slog.Logger) (envd.Backend, func() error, error) {
	var rc *rest.Config
	var err error
	if k.kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes config (set --kubeconfig outside a cluster): %w", err)
	}
	pods, err := kube.NewPods(rc)
	if err != nil {
		return nil, nil, err
	}
	opts := kube.Options{Pods: pods, Namespace: k.namespace, AgentImage: k.agentImage, RuntimeClass: k.runtimeClass,
		Owner: k.owner, WarmSize: k.warmSize, Logger: lg, ExecVia: k.execVia, RESTConfig: rc}
	if k.warmImage != "" {
		opts.Warm = []envd.Spec{{Image: k.warmImage}}
	}
	b, err := kube.New(opts)
	if err != nil {
		return nil, nil, err
	}
	if err := b.Start(ctx); err != nil {
		return nil, nil, err
	}
	return b, b.Close, nil
}
