package reconstruct

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// readParquet reads every row of a parquet file as values of t and
// returns each as the JSON line Export would have written.
func readParquet(t *testing.T, data []byte, typ reflect.Type) [][]byte {
	t.Helper()
	r := parquet.NewReader(bytes.NewReader(data))
	defer r.Close()
	var lines [][]byte
	for {
		v := reflect.New(typ)
		if err := r.Read(v.Interface()); errors.Is(err, io.EOF) {
			return lines
		} else if err != nil {
			t.Fatalf("read parquet row %d: %v", len(lines), err)
		}
		line, err := encodeLine(v.Elem().Interface(), false)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
}

// TestParquetRoundTrip exports every scenario in every trainer format as
// JSONL and as parquet, reads the parquet back and requires the same
// rows, value for value: tools and arguments of every shape come back
// unchanged. Rows without token ids go to their own file (TRL's two row
// shapes cannot share one).
func TestParquetRoundTrip(t *testing.T) {
	t.Parallel()
	inputs, _ := filepath.Glob(filepath.Join(goldenDir, "*.input.jsonl"))
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input.jsonl")
		for _, format := range TrainerFormats {
			t.Run(name+"/"+format, func(t *testing.T) {
				var jsonl, jsonlNo, pq, pqNo bytes.Buffer
				src := readInput(t, in)
				if _, err := Export(t.Context(), src, &jsonl, Options{Format: format, NoTokens: &jsonlNo}); err != nil {
					t.Fatal(err)
				}
				st, err := Export(t.Context(), src, &pq, Options{Format: format, Encoding: EncodingParquet, NoTokens: &pqNo})
				if err != nil {
					t.Fatal(err)
				}
				got := append(readParquet(t, pq.Bytes(), emptyRow(format, true)), readParquet(t, pqNo.Bytes(), emptyRow(format, false))...)
				want := bytes.SplitAfter(append(jsonl.Bytes(), jsonlNo.Bytes()...), []byte("\n"))
				want = want[:len(want)-1]
				if len(got) != st.Samples || len(want) != st.Samples {
					t.Fatalf("parquet rows %d, JSONL lines %d, samples %d", len(got), len(want), st.Samples)
				}
				for i := range got {
					if !bytes.Equal(got[i], want[i]) {
						t.Errorf("row %d:\nparquet %s\njsonl   %s", i, got[i], want[i])
					}
				}
			})
		}
	}
}

// TestParquetMixedRows: TRL rows with and without ids in one parquet
// file are refused with a message naming the flags that fix it.
func TestParquetMixedRows(t *testing.T) {
	t.Parallel()
	src := readInput(t, filepath.Join(goldenDir, "chat-tools.input.jsonl"))
	other := readInput(t, filepath.Join(goldenDir, "chat-parallel-stream.input.jsonl"))
	ep := other.eps[0].Episode
	ep.ID = "ep2"
	src.add(ep, other.calls["ep"])
	_, err := Export(t.Context(), src, io.Discard, Options{Format: FormatTRL, Encoding: EncodingParquet})
	if !errors.Is(err, ErrMixedRows) {
		t.Fatalf("Export = %v, want %v", err, ErrMixedRows)
	}
}

// TestToolsAsObjectsParquet: objects are refused for parquet (the column
// would merge the tool shapes of all rows).
func TestToolsAsObjectsParquet(t *testing.T) {
	t.Parallel()
	_, err := Export(t.Context(), newMemSource(), io.Discard, Options{Format: FormatSFT, Encoding: EncodingParquet, ToolsAs: ToolsAsObjects})
	if !errors.Is(err, ErrBadOptions) {
		t.Fatalf("Export = %v, want %v", err, ErrBadOptions)
	}
}

// TestMixedToolShapes: the qwen-canned scenario's tools and calls have
// different shapes; after a parquet round trip each is exactly as its
// request had it, with no member added.
func TestMixedToolShapes(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if _, err := Export(t.Context(), readInput(t, filepath.Join(goldenDir, "qwen-canned.input.jsonl")), &buf,
		Options{Format: FormatSFT, Encoding: EncodingParquet}); err != nil {
		t.Fatal(err)
	}
	rows := readParquet(t, buf.Bytes(), reflect.TypeFor[SFTSample]())
	var row SFTSample
	if err := json.Unmarshal(rows[0], &row); err != nil {
		t.Fatal(err)
	}
	want := `[{"function":{"description":"run read_file","name":"read_file","parameters":{"properties":{"absolute_path":{"type":"string"},"limit":{"type":"number"}},"required":["absolute_path"],"type":"object"}},"type":"function"},` +
		`{"function":{"description":"run run_shell_command","name":"run_shell_command","parameters":{"properties":{"command":{"type":"string"},"is_background":{"type":"boolean"}},"required":["command"],"type":"object"}},"type":"function"}]`
	if row.Tools != want {
		t.Errorf("tools = %s, want %s", row.Tools, want)
	}
	var args []string
	for _, m := range row.Messages {
		for _, tc := range m.ToolCalls {
			args = append(args, tc.Function.Arguments)
		}
	}
	if got := strings.Join(args, " "); got != `{"absolute_path":"/w/README.md","limit":20} {"command":"ls","is_background":false}` {
		t.Errorf("arguments = %s", got)
	}
}
