package envd

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestCheckWorkdir(t *testing.T) {
	t.Parallel()
	tests := []struct{ dir, wantErr string }{
		{"/work", ""},
		{"/srv/task", ""},
		{"/testbed", ""},
		{"/", "want an absolute path other than /"},
		{"work", "want an absolute path other than /"},
		{"/usr", "/usr is a system directory of the sandbox"},
		{"/usr/local/src", "/usr is a system directory of the sandbox"},
		{"/proc", "/proc is a system directory of the sandbox"},
		{"/.orchard", "/.orchard is a system directory of the sandbox"},
		{"/tmp/../etc", "/etc is a system directory of the sandbox"},
		{"/tmp/task", ""},
	}
	for _, tt := range tests {
		err := checkWorkdir(tt.dir)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("checkWorkdir(%q) = %v, want %q", tt.dir, err, tt.wantErr)
		}
		if status, _ := StatusFor(err); err != nil && status != http.StatusBadRequest {
			t.Errorf("checkWorkdir(%q): status %d, want 400", tt.dir, status)
		}
	}
}

// TestGate: the gate passes the episode's own model routes, with
// X-Orchard-* headers dropped, and answers 403 to everything else.
func TestGate(t *testing.T) {
	t.Parallel()
	var got []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.Path+" "+r.Header.Get("X-Orchard-Episode"))
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	gate := httptest.NewServer(newGate(u, "ep-1", slog.New(slog.DiscardHandler)))
	defer gate.Close()
	tests := []struct {
		path string
		want int
	}{
		{"/e/ep-1/v1/chat/completions", 200},
		{"/e/ep-1/v1/messages", 200},
		{"/e/ep-2/v1/chat/completions", 403},
		{"/v1/chat/completions", 403},
		{"/orchard/v1/episodes/ep-1/finish", 403},
		{"/e/ep-1/v1/../../../orchard/v1/episodes", 403},
		{"/e/ep-1/v1/%2e%2e/%2e%2e/orchard/v1/episodes", 403},
		{"/e/ep-1/v1//x", 403},
		{"/e/ep-1/v1", 403},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(http.MethodPost, gate.URL+tt.path, nil)
		req.URL.Opaque = tt.path // send the path as written
		req.Header.Set("X-Orchard-Episode", "ep-2")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tt.want {
			t.Errorf("POST %s = %d %s, want %d", tt.path, res.StatusCode, body, tt.want)
		}
	}
	if want := "/e/ep-1/v1/chat/completions |/e/ep-1/v1/messages "; strings.Join(got, "|") != want {
		t.Errorf("upstream saw %q, want %q", strings.Join(got, "|"), want)
	}
}
