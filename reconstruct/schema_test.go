package reconstruct

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestSchemasMatchGoldens checks every golden line against the top level
// of its JSON Schema in docs/schema: required fields present, no field the
// schema does not list.
func TestSchemasMatchGoldens(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		FormatTrajectories: "orchard.trajectory.v1.json", FormatTurns: "orchard.turn.v1.json",
	}
	for _, f := range TrainerFormats {
		files[f] = f + ".json"
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
		if format == FormatTRL {
			goldens = goldens[:0] // two row shapes: checked by TestRowSchemas
		} else if len(goldens) == 0 {
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

// rowTypes are the Go row types of the trainer formats.
var rowTypes = map[string][]reflect.Type{
	FormatSFT: {reflect.TypeFor[SFTSample]()}, FormatVerl: {reflect.TypeFor[VerlSample]()},
	FormatVerlPrompts: {reflect.TypeFor[VerlPromptSample]()}, FormatVerlAgent: {reflect.TypeFor[VerlAgentSample]()},
	FormatTRL:      {reflect.TypeFor[TRLTokenSample](), reflect.TypeFor[TRLPromptSample]()},
	FormatOpenRLHF: {reflect.TypeFor[OpenRLHFSample]()}, FormatOpenRLHFRL: {reflect.TypeFor[OpenRLHFRLSample]()},
	FormatSlime: {reflect.TypeFor[SlimeSample]()}, FormatTokens: {reflect.TypeFor[TokensSample]()},
}

// TestRowSchemas checks docs/schema/<format>.json of every trainer format
// against the JSON Schema its Go row type gives (-update rewrites them).
func TestRowSchemas(t *testing.T) {
	t.Parallel()
	for _, format := range TrainerFormats {
		types := rowTypes[format]
		var schema map[string]any
		if len(types) == 1 {
			schema = typeSchema(types[0])
		} else {
			var alts []any
			props := map[string]any{}
			for _, ty := range types {
				s := typeSchema(ty)
				alts = append(alts, s)
				maps.Copy(props, s["properties"].(map[string]any))
			}
			schema = map[string]any{"type": "object", "oneOf": alts, "properties": props}
		}
		schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
		schema["title"] = "orchard " + format + " row"
		got, _ := json.MarshalIndent(schema, "", "  ")
		got = append(got, '\n')
		path := filepath.Join("../docs/schema", format+".json")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from the %s row type (run with -update): %v", path, format, err)
		}
	}
}

// typeSchema is the JSON Schema of how encoding/json writes a value of t.
func typeSchema(t reflect.Type) map[string]any {
	switch t.Kind() {
	case reflect.Pointer:
		s := typeSchema(t.Elem())
		s["type"] = []any{s["type"], "null"}
		return s
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Int8, reflect.Int32, reflect.Int64, reflect.Int:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem())}
	case reflect.Struct:
		props, req := map[string]any{}, []string{}
		for f := range t.Fields() {
			name, opt, _ := strings.Cut(f.Tag.Get("json"), ",")
			s := typeSchema(f.Type)
			if strings.Contains(f.Tag.Get("parquet"), "optional") && f.Type.Kind() == reflect.Slice {
				s["type"] = []any{"array", "null"}
			}
			props[name] = s
			if opt != "omitempty" {
				req = append(req, name)
			}
		}
		return map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}
	}
	panic("no schema for " + t.String())
}
