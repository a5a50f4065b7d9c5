// Command orchard-agent is the sandbox agent alone, without the rest of
// orchard: the same code as "orchard sandbox-agent", in a binary that
// starts faster and uses less memory per sandbox (no Kubernetes, Redis or
// Prometheus packages to initialize). envd's local backend runs it when it
// sits next to the orchard binary.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/orchard-rl/orchard/envd/agent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "sandbox-agent" {
		args = args[1:] // accept orchard's subcommand form too
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := agent.ParseArgs(args)
	switch {
	case errors.Is(err, agent.ErrHelp):
		fmt.Print("Usage: orchard-agent [flags] [-- ENTRYPOINT...]\n\n" + agent.FlagUsages())
		return
	case err == nil && agent.ShouldInit(cfg, os.LookupEnv):
		var code int
		if code, err = agent.RunInit(cfg, logger); err == nil {
			os.Exit(code)
		}
	case err == nil:
		err = agent.Run(ctx, cfg, os.LookupEnv, logger)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orchard-agent:", err)
		os.Exit(1)
	}
}
