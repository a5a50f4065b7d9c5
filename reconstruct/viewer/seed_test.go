package viewer

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/embedded"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

const goldenDir = "../../testdata/reconstruct"

// scenarioNames are the reconstruct goldens' inputs the viewer's tests
// were written against, in the order they are seeded (one minute apart):
// the list's order. Scenarios added to the goldens later are left out, so
// that the expected rows stay put.
func scenarioNames(t testing.TB) []string {
	t.Helper()
	names := []string{"chat-parallel-stream", "chat-tools", "compaction", "completions", "edited-history", "failed-episode",
		"messages-parallel-stream-no-tokens", "messages-tools", "responses-parallel", "responses-tools-stream", "retries",
		"subagent-fork", "token-drift"}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(goldenDir, n+".input.jsonl")); err != nil {
			t.Fatalf("golden input: %v", err)
		}
	}
	return names
}

// readScenario reads one golden input: its episode line and calls.
func readScenario(t testing.TB, name string) (recorder.Episode, []*recorder.Call) {
	t.Helper()
	return storetest.ReadEpisodeFile(t, filepath.Join(goldenDir, name+".input.jsonl"))
}

// seedGoldens stores every golden input as an episode named after it:
// task-2 for the fork and drift scenarios (task-1 otherwise), reward
// i/10 for the i-th, a planner selection weight on chat-tools. It adds
// the episode "xss", whose recorded text is markup.
func seedGoldens(t testing.TB, s recorder.Store) []string {
	t.Helper()
	names := scenarioNames(t)
	for i, name := range names {
		ep, calls := readScenario(t, name)
		ep.ID, ep.CreatedAt = name, storetest.Epoch.Add(time.Duration(i)*time.Minute)
		if name == "subagent-fork" || name == "token-drift" {
			ep.TaskID = "task-2"
		}
		r := float64(i) / 10
		ep.Reward = &r
		if name == "chat-tools" {
			ep.Metadata = json.RawMessage(`{"selection_weight":0.25}`)
		}
		for _, c := range calls {
			c.EpisodeID = name
		}
		put(t, s, &ep, calls)
	}
	_, calls := readScenario(t, "chat-tools")
	for _, c := range calls {
		c.EpisodeID = "xss"
		c.Request = json.RawMessage(strings.ReplaceAll(string(c.Request), `"list the files"`, `"<script>alert(1)</script>"`))
	}
	put(t, s, &recorder.Episode{ID: "xss", TaskID: `<img src=x onerror=alert(2)>`, GroupID: "xss-group", Status: recorder.StatusSuccess,
		CreatedAt: storetest.Epoch.Add(time.Hour)}, calls)
	return append(names, "xss")
}

func put(t testing.TB, s recorder.Store, ep *recorder.Episode, calls []*recorder.Call) {
	t.Helper()
	if err := s.PutEpisode(context.Background(), ep); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteCalls(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
}

func openStore(t testing.TB) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fakeRewards is an annotator that gives every turn reward 0.5 and
// advantage 0.5 (-0.5 in failed episodes), every trained token its
// turn's advantage, and fires rule "tool-ok" on each "ok" in a tool
// result.
type fakeRewards struct{}

func (fakeRewards) AnnotateTrajectory(t *reconstruct.Trajectory) error {
	adv := 0.5
	if t.Outcome.Status == recorder.StatusFailure {
		adv = -0.5
	}
	for j := range t.Turns {
		t.Turns[j].Reward, t.Turns[j].Advantage = ptr(0.5), ptr(adv)
	}
	for i, m := range t.Messages {
		at := strings.Index(contentText(m.Content), "ok")
		if m.Role != "tool" || at < 0 || len(t.Turns) == 0 {
			continue
		}
		j := len(t.Turns) - 1
		for k := range t.Turns {
			if t.Turns[k].MessageIndex > i {
				j = k
				break
			}
		}
		t.Turns[j].RuleHits = append(t.Turns[j].RuleHits, reconstruct.RuleHit{Rule: "tool-ok", Delta: 0.1,
			Evidence: reconstruct.Evidence{MessageIndex: i, Start: at, End: at + 2}})
	}
	if t.Tokens != nil {
		t.Tokens.Advantages = make([]float64, len(t.Tokens.InputIDs))
		for i, m := range t.Tokens.LossMask {
			t.Tokens.Advantages[i] = adv * float64(m)
		}
	}
	return nil
}

func (fakeRewards) AnnotateTurn(t *reconstruct.Turn) error {
	t.Reward = ptr(0.5)
	return nil
}

func ptr(f float64) *float64 { return &f }

// serve starts the viewer over a seeded store on a real socket.
func serve(t testing.TB, opts Options) (*httptest.Server, []string) {
	t.Helper()
	s := openStore(t)
	names := seedGoldens(t, s)
	opts.Source = s
	if opts.Annotator == nil {
		opts.Annotator = fakeRewards{}
	}
	srv := httptest.NewServer(New(opts))
	t.Cleanup(srv.Close)
	return srv, names
}

// get fetches path without following redirects.
func get(t testing.TB, srv *httptest.Server, path string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest("GET", srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(body), res.Header
}
