package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/reconstruct"
)

// checkTrainerExport exports a recorded episode with token ids as
// parquet and as split JSONL: files are readable by others (0666 less the
// umask), --strict passes, and the report counts the samples with ids.
func checkTrainerExport(t *testing.T, data string) {
	t.Helper()
	dir := t.TempDir()
	probe, err := os.OpenFile(filepath.Join(dir, "probe"), os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := probe.Stat()
	probe.Close()
	wantMode := st.Mode().Perm()

	pq := filepath.Join(dir, "rl.parquet")
	msg, err := runCLI(t, "export", "--data", data, "--format", "slime", "--out", pq, "--strict", "--check")
	if err != nil {
		t.Fatalf("export slime parquet --strict: %v\n%s", err, msg)
	}
	if !strings.Contains(msg, "format slime: 1 samples with token ids, 0 without") {
		t.Errorf("report does not count the samples with ids:\n%s", msg)
	}
	fi, err := os.Stat(pq)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != wantMode {
		t.Errorf("mode of %s = %v, want %v", pq, fi.Mode().Perm(), wantMode)
	}
	if b, _ := os.ReadFile(pq); !bytes.HasPrefix(b, []byte("PAR1")) || !bytes.HasSuffix(b, []byte("PAR1")) {
		t.Errorf("%s is not a parquet file", pq)
	}

	js := filepath.Join(dir, "sft.jsonl")
	if msg, err := runCLI(t, "export", "--data", data, "--format", "trl", "--out", js, "--split-by-tokens"); err != nil {
		t.Fatalf("export trl --split-by-tokens: %v\n%s", err, msg)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sft.no-ids.jsonl")); err != nil || len(b) != 0 {
		t.Errorf("no-ids file: %q, %v (want empty: every call has ids)", b, err)
	}
	if msg, err := runCLI(t, "export", "--data", data, "--format", "turns", "--check"); err != nil || !strings.Contains(msg, "format turns: 2 samples with token ids") {
		t.Errorf("turns --check: %v\n%s", err, msg)
	}
	for _, bad := range [][]string{
		{"--format", "turns", "--out", filepath.Join(dir, "t.parquet")},
		{"--format", "sft", "--out", filepath.Join(dir, "t.parquet"), "--tools-as", "objects"},
		{"--format", "sft", "--split-by-tokens"},
	} {
		if _, err := runCLI(t, append([]string{"export", "--data", data}, bad...)...); err == nil {
			t.Errorf("export %v succeeded", bad)
		}
	}
}

// TestExportReportHonest: without token ids the report says so, names the
// flag that records them, and --strict fails.
func TestExportReportHonest(t *testing.T) {
	t.Parallel()
	st := reconstruct.Stats{Samples: 3, WithoutIDs: 3, Dropped: map[string]int{reconstruct.DropUntrainedHistory: 1}}
	var b bytes.Buffer
	printExportReport(&b, reconstruct.FormatVerl, &st, 0)
	for _, want := range []string{"format verl: 0 samples with token ids, 3 without", "dropped         untrained_assistant_in_history 1",
		"hint: no sample has token ids; record with --upstream-kind vllm or sglang"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if strictOK(&st) {
		t.Error("strictOK = true for samples without ids, want false")
	}
	if !strictOK(&reconstruct.Stats{Samples: 1, WithIDs: 1}) {
		t.Error("strictOK = false for a clean export, want true")
	}
}
