package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/orchard-rl/orchard/internal/cliconf"
	"github.com/orchard-rl/orchard/reconstruct/viewer"
)

// viewConfig is `orchard view`'s configuration.
type viewConfig struct {
	Listen     string // address to serve on; default 127.0.0.1:7070; env ORCHARD_VIEW_LISTEN
	Auth       string // none or required; env ORCHARD_AUTH
	AdminToken string // token required with --auth required; env ORCHARD_ADMIN_TOKEN
}

// Validate rejects an auth mode without its token, and serving beyond
// loopback without auth.
func (c *viewConfig) Validate() error {
	switch c.Auth {
	case "none":
		host, _, err := net.SplitHostPort(c.Listen)
		if err != nil {
			return fmt.Errorf("--listen %q: %w", c.Listen, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("--listen %s is not a loopback address: the viewer shows every recording, so serve it beyond this machine only with --auth required", c.Listen)
		}
	case "required":
		if c.AdminToken == "" {
			return errors.New("--auth required needs --admin-token (or ORCHARD_ADMIN_TOKEN)")
		}
	default:
		return fmt.Errorf("--auth %q: want none or required", c.Auth)
	}
	return nil
}

func newViewCmd() *cobra.Command {
	var sf storeFlags
	var cfg viewConfig
	cmd := &cobra.Command{
		Use:   "view",
		Short: "Serve a read-only web viewer of episodes, turns, tokens and rewards",
		Long: `Serve a web UI over the recorded episodes: the episode list with filters and search, an
episode's turns, segments and token pane (loss mask, logprobs, advantages), and a group's
rollouts side by side. It reads the store live, while a proxy writes it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return err
			}
			st, err := openReadStore(cmd, &sf)
			if err != nil {
				return err
			}
			defer st.Close()
			token := ""
			if cfg.Auth == "required" {
				token = cfg.AdminToken
			}
			h := viewer.New(viewer.Options{Source: st, AdminToken: token})
			return serveView(cmd.Context(), cfg.Listen, h, cmd.OutOrStdout())
		},
	}
	addStoreFlags(cmd, &sf)
	cmd.Flags().StringVar(&cfg.Listen, "listen", "127.0.0.1:7070", "address to serve the viewer on")
	cmd.Flags().StringVar(&cfg.Auth, "auth", "none", "none, or required: every page needs the admin token")
	cmd.Flags().StringVar(&cfg.AdminToken, "admin-token", "", "admin token the viewer requires with --auth required")
	cliconf.SetEnv(cmd.Flags(), "listen", "ORCHARD_VIEW_LISTEN")
	cliconf.EnvOnly(cmd.Flags(), "admin-token")
	return cmd
}

// serveView serves h on addr until ctx is done, then shuts down within
// five seconds. It prints the address it serves on to out.
func serveView(ctx context.Context, addr string, h http.Handler, out io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "orchard view: serving http://%s/\n", ln.Addr())
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve viewer: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return g.Wait()
}
