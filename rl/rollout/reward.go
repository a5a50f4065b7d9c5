package rollout

import (
	"strconv"
	"strings"

	"github.com/orchard-rl/orchard/envd"
)

// VerifierReward is the number on the verifier's last stdout line, or
// 1/0 by its exit code.
func VerifierReward(r *envd.ExecResult) float64 {
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if v, err := strconv.ParseFloat(strings.TrimSpace(lines[len(lines)-1]), 64); err == nil {
		return v
	}
	return boolReward(r.ExitCode == 0)
}

func boolReward(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
