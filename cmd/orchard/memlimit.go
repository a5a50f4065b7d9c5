package main

import (
	"log/slog"
	"math"
	"os"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// memoryLimitRatio is the share of its container's memory limit that a
// long-running command lets the Go runtime's heap and stacks grow to: the
// rest is left to the binary's pages and what the runtime does not count.
const memoryLimitRatio = 0.9

// limitMemory gives the Go runtime a soft memory limit of
// memoryLimitRatio of the cgroup's memory limit, when the process runs
// under one and GOMEMLIMIT does not set a limit already. The collector
// lets the heap grow to twice what is live between collections; with the
// limit it collects sooner as the heap nears it, so a burst of calls (a
// rollout's first turns arrive together) costs collector time instead of
// an out-of-memory kill that loses the calls in flight. Outside a
// container with a limit it changes nothing.
func limitMemory(lg *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return // the runtime read it at start
	}
	limit, err := memlimit.Set(memlimit.WithProvider(memlimit.FromCgroup), memlimit.WithRatio(memoryLimitRatio))
	switch {
	case err != nil:
		lg.Debug("no container memory limit to follow", "err", err)
	case limit > 0 && limit < math.MaxInt64:
		lg.Info("Go memory limit set from the container's memory limit", "bytes", limit, "ratio", memoryLimitRatio)
	}
}
