package main

import (
	"errors"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/orchard-rl/orchard/envd/agent"
)

func newSandboxAgentCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "sandbox-agent [--listen ADDR | --listen-fd N] [--workdir DIR] [--install PATH] [-- ENTRYPOINT...]",
		Short: "Run inside a sandbox: serve exec and files for envd (started by envd, not by hand)",
		Long: `The in-sandbox agent. envd's local backend starts it inside each bubblewrap jail with
--listen-fd; on Kubernetes it is the pod's command, "orchard sandbox-agent --listen :7070 --
<original entrypoint>", copied in by an init container running "orchard sandbox-agent --install".
As PID 1 (or with --init) it becomes a minimal init: it runs the agent again as its child, forwards
signals to it, reaps orphaned processes, and exits with the agent's status.
Its flags have no environment variables: its environment is the sandbox image's.

Agent flags:
` + agent.FlagUsages(),
		DisableFlagParsing: true, // the agent parses its own flags, shared with the tests
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := agent.ParseArgs(args)
			if errors.Is(err, agent.ErrHelp) {
				return cmd.Help()
			}
			if err != nil {
				return err
			}
			logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
			if agent.ShouldInit(cfg, os.LookupEnv) {
				code, err := agent.RunInit(cfg, logger)
				if err == nil && code != 0 {
					err = exitError{code}
				}
				return err
			}
			return agent.Run(cmd.Context(), cfg, os.LookupEnv, logger)
		},
	}
}
