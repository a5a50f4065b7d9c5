package rollout

import (
	"math"
	"testing"

	"github.com/orchard-rl/orchard/envd"
)

func TestVerifierReward(t *testing.T) {
	for _, tc := range []struct {
		name, stdout string
		exit         int
		want         float64
	}{
		{"number", "0.75\n", 0, 0.75},
		{"number wins over exit", "0.25\n", 1, 0.25},
		{"last line counts", "running tests\n3 passed\n1\n", 1, 1},
		{"spaces and blank lines", "log\n  0.5  \n\n\n", 0, 0.5},
		{"negative", "-1\n", 0, -1},
		{"exponent", "1e-1", 0, 0.1},
		{"zero number with exit 0", "0\n", 0, 0},
		{"text with exit 0", "ok\n", 0, 1},
		{"text with exit 1", "FAILED\n", 1, 0},
		{"number not last", "1\ndone\n", 2, 0},
		{"empty with exit 0", "", 0, 1},
		{"empty with exit 1", "", 1, 0},
		{"trailing text on the line", "1 of 2\n", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := VerifierReward(&envd.ExecResult{Stdout: tc.stdout, ExitCode: tc.exit})
			if got != tc.want {
				t.Errorf("VerifierReward(%q, exit %d) = %v, want %v", tc.stdout, tc.exit, got, tc.want)
			}
		})
	}
}

func TestVerifierRewardNonFinite(t *testing.T) {
	// ParseFloat accepts these; they come back as the verifier printed them.
	if got := VerifierReward(&envd.ExecResult{Stdout: "NaN\n"}); !math.IsNaN(got) {
		t.Errorf("NaN: got %v", got)
	}
	if got := VerifierReward(&envd.ExecResult{Stdout: "+Inf\n", ExitCode: 1}); !math.IsInf(got, 1) {
		t.Errorf("+Inf: got %v", got)
	}
}

func TestTail(t *testing.T) {
	if got := tail("abcdef", 4); got != "cdef" {
		t.Errorf("tail = %q", got)
	}
	if got := tail("ab", 4); got != "ab" {
		t.Errorf("tail short = %q", got)
	}
}
