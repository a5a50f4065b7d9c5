package local

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/orchard-rl/orchard/envd/agent"
)

// agentModeEnv makes the test binary act as the sandbox agent, so the
// tests run the real agent code inside real jails without building the
// orchard binary.
const agentModeEnv = "ORCHARD_AGENT_TEST_MODE"

func TestMain(m *testing.M) {
	if os.Getenv(agentModeEnv) == "1" {
		os.Exit(runAgent())
	}
	if os.Getenv(probeModeEnv) == "1" {
		os.Exit(runProbe(os.Args[1:]))
	}
	if os.Getenv(serveModeEnv) != "" {
		os.Exit(runServe())
	}
	goleak.VerifyTestMain(m)
}

func runAgent() int {
	cfg, err := agent.ParseArgs(os.Args[1:])
	if err == nil {
		err = agent.Run(context.Background(), cfg, os.LookupEnv, slog.New(slog.DiscardHandler))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 1
	}
	return 0
}
