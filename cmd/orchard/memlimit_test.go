package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProxyFollowsCgroupMemoryLimit runs the proxy as a process in a
// memory cgroup of its own with a 256 MiB limit: it sets the Go runtime's
// memory limit to 90% of that (and says so), and leaves a GOMEMLIMIT the
// operator set alone. It needs a memory cgroup it may create (root on
// cgroup v1, or a delegated cgroup v2 subtree), else it is skipped.
func TestProxyFollowsCgroupMemoryLimit(t *testing.T) {
	const limit = 256 << 20
	cg := memoryCgroup(t, limit)
	want := "bytes=241591910" // 90% of 256 MiB, rounded down
	if got := proxyLimitLog(t, cg, ""); !strings.Contains(got, "Go memory limit set") || !strings.Contains(got, want) {
		t.Errorf("proxy under a %d-byte cgroup limit logged %q, want the limit set with %s", limit, got, want)
	}
	if got := proxyLimitLog(t, cg, "GOMEMLIMIT=1GiB"); strings.Contains(got, "Go memory limit set") {
		t.Errorf("proxy with GOMEMLIMIT set logged %q, want the operator's limit kept", got)
	}
}

// proxyLimitLog starts the proxy in cgroup dir cg with extra environment
// and returns its log up to the line that says it listens.
func proxyLimitLog(t *testing.T, cg, env string) string {
	t.Helper()
	// The shell moves itself into the cgroup, then becomes the proxy.
	script := `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`
	cmd := exec.Command("sh", "-c", script, "sh", cg, os.Args[0], "proxy", "--listen", "127.0.0.1:0",
		"--upstream", "http://127.0.0.1:9/v1", "--data", t.TempDir())
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMEMLIMIT=") })
	cmd.Env = append(cmd.Env, "ORCHARD_TEST_MAIN=1", "ORCHARD_SPILL_DIR="+t.TempDir())
	if env != "" {
		cmd.Env = append(cmd.Env, env)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "listening") {
			return log.String()
		}
	}
	t.Fatalf("proxy exited before listening: %s", log.String())
	return ""
}

// memoryCgroup makes a child of this process's memory cgroup with the
// given limit and returns its directory, removed when the test ends.
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no cgroups: %v", err)
	}
	var dir, file string
	for line := range strings.Lines(string(own)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		switch {
		case len(parts) < 3:
		case slices.Contains(strings.Split(parts[1], ","), "memory"): // cgroup v1
			dir, file = filepath.Join("/sys/fs/cgroup/memory", parts[2]), "memory.limit_in_bytes"
		case parts[0] == "0" && parts[1] == "" && dir == "": // cgroup v2
			dir, file = filepath.Join("/sys/fs/cgroup", parts[2]), "memory.max"
		}
	}
	if dir == "" {
		t.Skip("no memory cgroup")
	}
	cg := filepath.Join(dir, fmt.Sprintf("orchard-memlimit-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		// The proxy has exited, but the kernel may take a moment to let
		// go of the cgroup: rmdir fails with EBUSY until it has.
		for try := 0; try < 100 && os.Remove(cg) != nil; try++ {
			time.Sleep(10 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(cg, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Skipf("cannot limit a memory cgroup: %v", err)
	}
	return cg
}
