package reconstruct

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// fixtureRequest is one line of testdata/harness-requests/*.jsonl.
type fixtureRequest struct {
	Path string          `json:"path"`
	Body json.RawMessage `json:"body"`
}

var fixtureAPIs = map[string]recorder.API{
	"/v1/chat/completions": apiChat,
	"/v1/responses":        apiResponses,
	"/v1/messages":         apiMessages,
	"/v1/completions":      apiCompletions,
}

// fixtureBodies returns every recorded request body of the harness
// fixtures, by file and line.
func fixtureBodies(t testing.TB) map[string][]fixtureRequest {
	t.Helper()
	files, err := filepath.Glob("../testdata/harness-requests/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	out := map[string][]fixtureRequest{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var r fixtureRequest
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(r.Body) > 0 {
				out[filepath.Base(name)] = append(out[filepath.Base(name)], r)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// sameJSON reports whether a and b encode the same JSON value.
func sameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("unmarshal a: %v", err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("unmarshal b: %v", err)
	}
	return reflect.DeepEqual(va, vb)
}

func TestRoundTripFixtures(t *testing.T) {
	t.Parallel()
	total := 0
	for file, reqs := range fixtureBodies(t) {
		for i, r := range reqs {
			api := fixtureAPIs[r.Path]
			conv, err := DecodeRequest(api, r.Body)
			if err != nil {
				t.Fatalf("%s:%d DecodeRequest: %v", file, i, err)
			}
			got, err := encodeRequest(conv)
			if err != nil {
				t.Fatalf("%s:%d encodeRequest: %v", file, i, err)
			}
			if !sameJSON(t, got, r.Body) {
				t.Errorf("%s:%d round trip differs:\n got %.600s\nwant %.600s", file, i, got, r.Body)
			}
			total++
		}
	}
	if total != 15 {
		t.Errorf("round-tripped %d fixture bodies, want 15", total)
	}
}
