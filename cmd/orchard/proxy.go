package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/proxy/episodes"
	"github.com/orchard-rl/orchard/reconstruct/serve"
	"github.com/orchard-rl/orchard/recorder"
	lin "github.com/orchard-rl/orchard/recorder/lineage"
)

func newProxyCmd() *cobra.Command {
	var cfg proxyConfig
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Run the recording proxy in front of an inference server",
		Long: `Run the recording proxy. Point a harness at it with OPENAI_BASE_URL=http://HOST/e/EPISODE/v1
or ANTHROPIC_BASE_URL=http://HOST/e/EPISODE; every model call is forwarded untouched to
--upstream and recorded under its episode in the store (--data, or --redis).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lg := slog.New(slog.NewTextHandler(os.Stderr, nil))
			limitMemory(lg)
			return runProxy(cmd.Context(), &cfg, lg, nil)
		},
	}
	cfg.register(cmd.Flags())
	return cmd
}

// runProxy serves until ctx is done, then shuts down in order: stop taking
// requests, let in-flight calls finish, hand every record to the pipeline,
// drain the pipeline into the store. ready, if not nil, receives the
// listening address.
func runProxy(ctx context.Context, cfg *proxyConfig, lg *slog.Logger, ready chan<- string) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	def, anth, routes, err := cfg.upstreams()
	if err != nil {
		return err
	}
	signer, err := newSigner(cfg.TokenSecret, lg)
	if err != nil {
		return err
	}
	store, err := openWriteStore(ctx, cfg.Data, cfg.Redis, cfg.Retention, dedupBounds{cfg.DedupMemory, cfg.DedupEpisodes}, lg)
	if err != nil {
		return err
	}
	defer store.Close()
	if cfg.PprofListen != "" {
		stopPprof, err := servePprof(cfg.PprofListen, lg)
		if err != nil {
			return err
		}
		defer stopPprof()
	}
	pipe := recorder.NewPipeline(store, recorder.PipelineOptions{SpillDir: spillDir(cfg), Logger: lg})
	if err := pipe.Open(); err != nil {
		return fmt.Errorf("open spill: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(pipe.Collectors()...)
	api := episodes.New(episodes.Options{
		Store: lin.Store{Store: store}, Signer: signer, Finishes: finishFeed(store),
		AdminToken: cfg.AdminToken, PublicURL: cfg.PublicURL, TokenTTL: cfg.TokenTTL, Logger: lg,
	})
	defer api.Close()
	// The finish feed runs until api.Close, so that calls still in flight
	// during the graceful shutdown are checked against it.
	if err := api.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	h := proxy.New(proxy.Options{
		Upstream: def, Anthropic: anth, Routes: routes,
		Sink:        pipe,
		IdleTimeout: cfg.IdleTimeout, MaxBodyBytes: cfg.MaxBody, BodyReadTimeout: cfg.BodyTimeout,
		Logger:   lg,
		Verifier: api, RequireToken: cfg.Auth == "required",
		Registry: reg, LiveLineage: cfg.LiveLineage,
	})
	// A finished episode's lineage state goes once its calls are recorded.
	api.OnFinish(h.Forget)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	ln = newLimitListener(ln, cfg.MaxConns)
	// ctx bounds the upstream-kind probes; the record workers run until
	// h.Close below, after the server has drained.
	if err := h.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	// The episode API and the samples of finished episodes are served
	// beside the proxy, which imports neither.
	samples := serve.New(serve.Options{Source: store, AdminToken: cfg.AdminToken, Next: api.Beside(h)})
	srv := cfg.serverLimits.newServer(samples)
	// A burst of events goes to the client in one write syscall.
	ln = proxy.Listener(srv, ln)
	lg.Info("proxy listening", "addr", ln.Addr().String(), "upstream", def.String(), "store", storeName(cfg))
	if ready != nil {
		ready <- ln.Addr().String()
	}

	pipeCtx, stopPipe := context.WithCancel(context.WithoutCancel(ctx))
	var g errgroup.Group
	g.Go(func() error { return pipe.Start(pipeCtx) })
	if cfg.Retention > 0 {
		g.Go(func() error { return runGC(pipeCtx, store, cfg.Retention, lg) })
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if serr := srv.Shutdown(shutCtx); serr != nil {
		lg.Warn("shutdown: in-flight calls cut", "err", serr)
		srv.Close()
	}
	if err == nil {
		err = <-serveErr
	}
	if cerr := h.Close(); cerr != nil {
		lg.Warn("proxy close", "err", cerr)
	}
	stopPipe()
	if perr := g.Wait(); perr != nil && !errors.Is(perr, context.Canceled) {
		return perr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func storeName(cfg *proxyConfig) string {
	if cfg.Redis != "" {
		return "redis"
	}
	return "embedded:" + cfg.Data
}

// newSigner returns the episode token signer. Without a configured secret
// it makes a random one: tokens then die with the process and verify on
// this replica only, which is fine for one proxy on the embedded store.
func newSigner(secret string, lg *slog.Logger) (*episodes.Signer, error) {
	key := []byte(secret)
	if len(key) == 0 {
		key = make([]byte, 32)
		rand.Read(key)
		lg.Info("no --token-secret: episode tokens are valid on this process only, until it stops")
	}
	return episodes.NewSigner(key)
}

// servePprof serves the runtime profiles on their own listener, so they
// are never reachable through the proxy's port. The returned func stops it.
func servePprof(addr string, lg *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for pprof on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	lg.Info("pprof listening", "addr", ln.Addr().String())
	return func() { srv.Close(); <-done }, nil
}
