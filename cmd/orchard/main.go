// Command orchard is the single binary of the project: the recording proxy,
// the episode CLI, the exporter and the sandbox service, as subcommands.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "orchard:", err)
		os.Exit(1)
	}
}

// exitError carries a specific exit status out of a subcommand that has
// already reported its problem.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "orchard",
		Short:         "Record agent harness model calls and turn them into RL training data",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applySettings(cmd, lookupEnv)
		},
	}
	root.AddCommand(
		newProxyCmd(),
		newEpisodesCmd(),
		newExportCmd(),
		newRewardsCmd(),
		newRerankCmd(),
		newGCCmd(),
		newViewCmd(),
		newEnvdCmd(),
		newRunCmd(),
		newRolloutCmd(),
		newSandboxAgentCmd(),
	)
	addConfigFlag(root)
	return root
}
