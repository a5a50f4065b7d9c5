package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/reconstruct/serve"
	"github.com/orchard-rl/orchard/recorder/embedded"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

func get(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func TestSamples(t *testing.T) {
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	storetest.SeedEpisodes(t, st)
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(299) })
	ts := httptest.NewServer(serve.New(serve.Options{Source: st, AdminToken: "adm", Next: next}))
	defer ts.Close()

	for _, format := range []string{reconstruct.FormatTurns, reconstruct.FormatTrajectories} {
		status, body := get(t, ts.URL+"/orchard/v1/episodes/e1/samples?format="+format, "adm")
		var ans serve.Answer
		if err := json.Unmarshal(body, &ans); status != 200 || err != nil {
			t.Fatalf("samples %s = %d %s", format, status, body)
		}
		var want bytes.Buffer
		if _, err := reconstruct.Export(context.Background(), st, &want, reconstruct.Options{Format: format, Episodes: []string{"e1"}}); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		for _, s := range ans.Samples {
			got.Write(s)
			got.WriteByte('\n')
		}
		if got.String() != want.String() || ans.Calls != 3 || ans.Status != "success" || ans.Format != format {
			t.Errorf("samples %s: calls %d status %s, %d samples; want the export's %d lines of 3 calls", format, ans.Calls, ans.Status, len(ans.Samples), strings.Count(want.String(), "\n"))
		}
	}
	if status, body := get(t, ts.URL+"/orchard/v1/episodes/e1/samples", "adm"); status != 200 || !strings.Contains(string(body), `"format":"trajectories"`) {
		t.Errorf("samples without a format: %d %s, want trajectories", status, body)
	}
	tests := []struct {
		name, path, token string
		status            int
		msg               string
	}{
		{"no token", "/orchard/v1/episodes/e1/samples", "", 401, "admin token"},
		{"unknown episode", "/orchard/v1/episodes/nope/samples", "adm", 404, "episode nope not found"},
		{"running", "/orchard/v1/episodes/e4/samples", "adm", 409, "still running"},
		{"bad format", "/orchard/v1/episodes/e1/samples?format=csv", "adm", 400, `format "csv": want one of`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := get(t, ts.URL+tt.path, tt.token)
			var e struct{ Error struct{ Message string } }
			_ = json.Unmarshal(body, &e)
			if status != tt.status || !strings.Contains(e.Error.Message, tt.msg) {
				t.Errorf("GET %s = %d %s, want %d with %q", tt.path, status, body, tt.status, tt.msg)
			}
		})
	}
	if status, _ := get(t, ts.URL+"/orchard/v1/episodes/e1", "adm"); status != 299 {
		t.Errorf("other routes: status %d, want Next's 299", status)
	}
}
