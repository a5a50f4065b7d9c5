package local

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/envd"
)

// netnsInnerEnv marks the test binary re-run inside a network namespace
// of its own by TestEscapeNonLoopback.
const netnsInnerEnv = "ORCHARD_TEST_NETNS_INNER"

// TestEscapeNonLoopback: a sandbox cannot connect to a non-loopback
// address the host reaches. The test runs itself again in a new network
// namespace holding a veth pair with 198.18.0.1 (a benchmarking
// range, never a real outside address), serves there, and probes it
// from sandboxes in each mode: only host mode reaches it.
func TestEscapeNonLoopback(t *testing.T) {
	if os.Getenv(netnsInnerEnv) == "1" {
		nonLoopbackInner(t)
		return
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2 (ip) is not installed")
	}
	if err := exec.Command("unshare", "--net", "true").Run(); err != nil {
		t.Skipf("cannot create a network namespace here: %v", err)
	}
	t.Parallel()
	cmd := exec.Command("unshare", "--net", "--", os.Args[0], "-test.run", "^TestEscapeNonLoopback$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), netnsInnerEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestEscapeNonLoopback") {
		t.Fatalf("inner run in a network namespace: %v\n%s", err, out)
	}
}

func nonLoopbackInner(t *testing.T) {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "orchard0", "type", "veth", "peer", "name", "orchard1"},
		{"addr", "add", "198.18.0.1/24", "dev", "orchard0"},
		{"link", "set", "orchard0", "up"},
		{"link", "set", "orchard1", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	ln, err := net.Listen("tcp", "198.18.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go acceptAll(ln)
	e := newEnv(t, envd.Options{})
	target := "TCP " + ln.Addr().String()
	for mode, want := range map[string]string{envd.NetworkProxy: "err", envd.NetworkNone: "err", envd.NetworkHost: "open"} {
		sb := e.create(t, envd.Spec{Network: mode})
		if got := probe(t, sb, target); strings.Join(got, " ") != want {
			t.Errorf("network %s: connect to %s = %v, want %s", mode, ln.Addr(), got, want)
		}
	}
}
