package embedded

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/recorder"
)

// TestDiskFull runs diskFullScenario in a child process in a private mount
// namespace with a real 2 MiB tmpfs as the data dir (root is needed to
// mount; without it the test says so and skips).
func TestDiskFull(t *testing.T) {
	if dir := os.Getenv("ORCHARD_TEST_TMPFS"); dir != "" {
		diskFullScenario(t, dir)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; run as root (CI does) to test a full disk")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare(1) not found: cannot mount a private tmpfs")
	}
	dir := t.TempDir()
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs -o size=2m tmpfs "$0" && exec "$1" -test.run '^TestDiskFull$' -test.v`, dir, os.Args[0])
	cmd.Env = append(os.Environ(), "ORCHARD_TEST_TMPFS="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("disk-full scenario: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// diskFullScenario: with the tmpfs full, calls go on being accepted; store
// and spill writes fail and the calls wait in memory; once space is freed
// every call reaches the store exactly once. Then, with a backlog too small
// for a second burst, the calls that did not fit are dropped, counted, and
// reported by Start's error.
func diskFullScenario(t *testing.T, dir string) {
	st, err := Open(filepath.Join(dir, "data"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ballast := fill(t, filepath.Join(dir, "ballast"))
	p := recorder.NewPipeline(st, recorder.PipelineOptions{SpillDir: filepath.Join(dir, "data", "spill"),
		RetryInterval: 10 * time.Millisecond, SyncInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	calls := chatEpisode("ep-full", 80, 500)
	for _, c := range calls {
		p.Record(c)
	}
	if n := storedCalls(st, "ep-full"); n == len(calls) {
		t.Fatalf("all %d calls stored on a full disk: the disk was not full", n)
	}
	os.Remove(ballast)
	waitStored(t, st, "ep-full", len(calls))
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start after space came back: %v", err)
	}
	assertCalls(t, callsT(t, st, "ep-full"), calls)

	fill(t, ballast)
	small := recorder.NewPipeline(st, recorder.PipelineOptions{SpillDir: filepath.Join(dir, "data", "spill"), MaxBacklogBytes: 16 << 10})
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- small.Start(ctx) }()
	for _, c := range chatEpisode("ep-drop", 100, 200) {
		small.Record(c)
	}
	cancel()
	err = <-done
	stored := storedCalls(st, "ep-drop")
	if !errors.Is(err, recorder.ErrDropped) || small.Dropped() == 0 || int(small.Dropped())+stored != 100 {
		t.Fatalf("Start = %v, dropped %d, stored %d: want ErrDropped and dropped+stored = 100", err, small.Dropped(), stored)
	}
	t.Logf("second burst: %d of 100 calls dropped and reported", small.Dropped())
}

// fill writes path until the file system is full and returns path.
func fill(t *testing.T, path string) string {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			return path
		}
	}
}

func storedCalls(st *Store, ep string) int {
	cs, _ := st.Calls(context.Background(), ep)
	return len(cs)
}

// waitStored waits (bounded) until the store holds n calls of ep.
func waitStored(t *testing.T, st *Store, ep string, n int) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute)
	for storedCalls(st, ep) < n {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d of %d calls stored after space came back", storedCalls(st, ep), n)
		}
	}
}
