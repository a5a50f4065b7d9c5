package reconstruct

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestSchemasMatchGoldens checks every golden line against the top level
// of its JSON Schema in docs/schema: required fields present, no field the
// schema does not list.
func TestSchemasMatchGoldens(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		FormatTrajectories: "orchard.trajectory.v1.json", FormatTurns: "orchard.turn.v1.json",
		FormatSFT: "sft.json", FormatVerl: "verl.json", FormatTRL: "trl.json", FormatOpenRLHF: "openrlhf.json",
	}
	for format, file := range files {
		raw, err := os.ReadFile(filepath.Join("../docs/schema", file))
		if err != nil {
			t.Fatal(err)
		}
		var schema struct {
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		goldens, _ := filepath.Glob(filepath.Join(goldenDir, "*."+format+".golden"))
		if len(goldens) == 0 {
			t.Fatalf("no goldens for %s", format)
		}
		for _, g := range goldens {
			data, _ := os.ReadFile(g)
			for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
				if len(line) == 0 {
					continue
				}
				var row map[string]json.RawMessage
				if err := json.Unmarshal(line, &row); err != nil {
					t.Fatalf("%s: %v", g, err)
				}
				for _, k := range schema.Required {
					if _, ok := row[k]; !ok {
						t.Errorf("%s: missing %s required by %s", g, k, file)
					}
				}
				for k := range row {
					if _, ok := schema.Properties[k]; !ok {
						t.Errorf("%s: field %s not in %s", g, k, file)
					}
				}
			}
		}
	}
}
