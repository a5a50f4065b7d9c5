package embedded

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// TestHelperWriterProcess is not a test: TestReaderBesideWriterProcess runs
// the test binary as a child that writes the dir, one call per line read
// from stdin, printing "wrote N" after each.
func TestHelperWriterProcess(t *testing.T) {
	dir := os.Getenv("ORCHARD_TEST_WRITER_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	calls := chatEpisode("ep", 20, 300)
	in := bufio.NewScanner(os.Stdin)
	for i := 0; in.Scan() && i < len(calls); i++ {
		writeT(t, s, calls[i])
		fmt.Printf("wrote %d\n", i+1)
	}
	s.Close()
	os.Exit(0)
}

// TestReaderBesideWriterProcess: another process holds the dir; this one
// cannot Open it for writing but reads it with OpenReadOnly and sees each
// call as soon as the writer reports it stored.
func TestReaderBesideWriterProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriterProcess$")
	cmd.Env = append(os.Environ(), "ORCHARD_TEST_WRITER_DIR="+dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewScanner(stdout)
	step := func(i int) {
		t.Helper()
		fmt.Fprintln(stdin, "next")
		if !out.Scan() || out.Text() != fmt.Sprintf("wrote %d", i) {
			t.Fatalf("writer said %q, want %q", out.Text(), fmt.Sprintf("wrote %d", i))
		}
	}
	step(1)
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("Open beside another process's writer: %v, want ErrLocked", err)
	}
	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := chatEpisode("ep", 20, 300)
	for i := 1; i <= 20; i++ {
		if i > 1 {
			step(i)
		}
		assertCalls(t, callsT(t, r, "ep"), want[:i])
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("writer process: %v", err)
	}
	s := openT(t, dir, Options{}) // the lock died with the writer
	s.Close()
}
