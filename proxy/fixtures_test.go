package proxy_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/recorder"
)

// fixture is one captured harness request (testdata/harness-requests).
type fixture struct {
	Method  string              `json:"method"`
	Path    string              `json:"path"`
	Headers map[string][]string `json:"headers"`
	Body    json.RawMessage     `json:"body"`
}

func loadFixtures(t *testing.T, file string) []fixture {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []fixture
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var fx fixture
		if err := json.Unmarshal(sc.Bytes(), &fx); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, fx)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReplayHarnessFixtures replays real requests of Codex CLI, opencode,
// Qwen Code and Claude Code through the proxy: each is answered, and
// recorded with its api, model, tools and episode.
func TestReplayHarnessFixtures(t *testing.T) {
	e := newEnv(t, nil)
	files, _ := filepath.Glob("../testdata/harness-requests/*.jsonl")
	if len(files) != 4 {
		t.Fatalf("found %d fixture files, want 4", len(files))
	}
	wantAPI := map[string]recorder.API{"/v1/chat/completions": recorder.APIChatCompletions,
		"/v1/responses": recorder.APIResponses, "/v1/messages": recorder.APIMessages}
	for _, file := range files {
		harness := strings.TrimSuffix(filepath.Base(file), ".jsonl")
		t.Run(harness, func(t *testing.T) {
			for i, fx := range loadFixtures(t, file) {
				episode := "ep-" + harness
				ua := harness + "-replay-" + string(rune('a'+i))
				hdr := map[string]string{"User-Agent": ua}
				for k, v := range fx.Headers {
					switch strings.ToLower(k) {
					case "authorization", "x-api-key", "content-length", "user-agent", "connection":
					default:
						hdr[k] = v[0]
					}
				}
				path := fx.Path
				if harness == "claude-code" && fx.Method == "POST" {
					path += "?beta=true"
				}
				url := e.Proxy.URL + "/e/" + episode + strings.TrimSuffix(path, "/")
				if fx.Method == "HEAD" {
					if r := do(t, "HEAD", url, hdr, nil); r.Status != 200 {
						t.Fatalf("HEAD %s = %d, want 200", url, r.Status)
					}
					continue
				}
				r := do(t, fx.Method, url, hdr, fx.Body)
				if r.Err != nil || r.Status != 200 {
					t.Fatalf("line %d: status %d err %v body %.300s", i, r.Status, r.Err, r.Body)
				}
				c := e.Sink.ForHarness(t, ua)
				model := gjson.GetBytes(fx.Body, "model").String()
				if c.EpisodeID != episode || c.API != wantAPI[fx.Path] || c.Model != model {
					t.Fatalf("line %d: record episode %q api %q model %q; want %q %q %q", i, c.EpisodeID, c.API, c.Model, episode, wantAPI[fx.Path], model)
				}
				if got, want := gjson.GetBytes(c.Request, "tools.#").Int(), gjson.GetBytes(fx.Body, "tools.#").Int(); got != want {
					t.Errorf("line %d: %d tools recorded, want %d", i, got, want)
				}
				if !jsonEqual(t, c.Request, fx.Body) {
					t.Errorf("line %d: recorded request differs from the one sent", i)
				}
				if c.EndReason != recorder.EndDone || c.Response == nil {
					t.Errorf("line %d: end %q, response %d bytes", i, c.EndReason, len(c.Response))
				}
			}
		})
	}
	for _, r := range e.Up.Requests() {
		if r.Path == "/v1/messages" && r.RawQuery != "beta=true" {
			t.Errorf("upstream got query %q for /v1/messages, want beta=true", r.RawQuery)
		}
		if r.Header.Get("Anthropic-Version") == "" && r.Path == "/v1/messages" {
			t.Errorf("anthropic-version header lost")
		}
	}
}
