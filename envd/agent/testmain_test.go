package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// agentModeEnv makes the test binary act as the agent, the way
// orchard-agent's main does (init included), so that tests run the real
// thing as a process of its own, for example as PID 1 of a new PID
// namespace. With the value "hold", an agent that is not an init says
// "holding" on stdout and waits for stdin to close before it installs its
// signal handlers.
const agentModeEnv = "ORCHARD_AGENT_TEST_MODE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(agentModeEnv); mode != "" {
		os.Exit(agentMain(mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

func agentMain(mode string, args []string) int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg, err := ParseArgs(args)
	switch {
	case err == nil && ShouldInit(cfg, os.LookupEnv):
		var code int
		if code, err = RunInit(cfg, logger); err == nil {
			return code
		}
	case err == nil:
		if mode == "hold" {
			fmt.Println("holding")
			_, _ = io.Copy(io.Discard, os.Stdin)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = Run(ctx, cfg, os.LookupEnv, logger)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 1
	}
	return 0
}
