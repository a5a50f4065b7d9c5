package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/embedded"
)

// seedRerankStore writes candidates id -> (task, reward) with one chat
// call each, whose answer is "answer-ID", to an embedded store in dir.
func seedRerankStore(t *testing.T, dir string, cands [][3]string) {
	t.Helper()
	st, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, c := range cands {
		var r float64
		fmt.Sscan(c[2], &r)
		status := recorder.StatusFailure
		if r > 0 {
			status = recorder.StatusSuccess
		}
		start := at.Add(time.Duration(i) * time.Second)
		if err := st.PutEpisode(ctx, &recorder.Episode{ID: c[0], TaskID: c[1], Status: status, Reward: &r, CreatedAt: start}); err != nil {
			t.Fatal(err)
		}
		call := &recorder.Call{Schema: "orchard.call/v1", EpisodeID: c[0], CallID: "call-" + c[0], API: recorder.APIChatCompletions,
			Method: "POST", Path: "/v1/chat/completions", Model: "m", StartedAt: start, EndedAt: start, Status: 200, EndReason: recorder.EndDone,
			Request:  json.RawMessage(`{"model":"m","messages":[{"role":"user","content":"solve ` + c[1] + `"}]}`),
			Response: json.RawMessage(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"answer-` + c[0] + `"},"finish_reason":"stop"}]}`)}
		if err := st.WriteCalls(ctx, []*recorder.Call{call}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRerankCLI reranks nine recorded candidates of three tasks with a
// scripted value-model server, then evaluates; a garbage answer for one
// candidate stops the run or is skipped as --on-error says.
func TestRerankCLI(t *testing.T) {
	cands := [][3]string{{"a", "t1", "0"}, {"b", "t1", "1"}, {"c", "t1", "0"}, {"d", "t2", "0"}, {"e", "t2", "1"}, {"f", "t2", "0"},
		{"g", "t3", "0"}, {"h", "t3", "0"}, {"i", "t3", "0"}}
	values := map[string]string{"a": "0.2", "b": "0.9", "c": "0.4", "d": "0.7", "e": "0.6", "f": "0.1", "g": "0.3", "h": "0.5", "i": "0.5"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c := gjson.GetBytes(body, "candidates.0")
		id := c.Get("episode_id").String()
		if c.Get("final").String() != "answer-"+id || c.Get("prompt").String() != "solve "+c.Get("task_id").String() {
			http.Error(w, "bad candidate "+c.Raw, 400)
			return
		}
		if values[id] == "garbage" {
			fmt.Fprint(w, "not json")
			return
		}
		fmt.Fprintf(w, `{"scores":[{"episode_id":%q,"value":%s}]}`, id, values[id])
	}))
	defer srv.Close()
	data := t.TempDir()
	seedRerankStore(t, data, cands)

	out, err := runCLI(t, "rerank", "--data", data, "--scorer-url", srv.URL)
	if err != nil {
		t.Fatalf("rerank: %v\n%s", err, out)
	}
	var chosen []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		chosen = append(chosen, gjson.Get(line, "task_id").String()+"="+gjson.Get(line, "chosen").String())
	}
	if got := strings.Join(chosen, " "); got != "t1=b t2=d t3=h" {
		t.Errorf("rerank chose %s, want t1=b t2=d t3=h\n%s", got, out)
	}
	out, err = runCLI(t, "rerank", "eval", "--data", data, "--scorer-url", srv.URL)
	want := `{"tasks":3,"candidates":9,"pass_at_n":0.6666666666666666,"best_at_n":0.3333333333333333,` +
		`"random_at_n":0.2222222222222222,"auc":0.9285714285714286,"ece":0.35555555555555557}`
	var compact bytes.Buffer
	_ = json.Compact(&compact, []byte(out))
	if err != nil || compact.String() != want {
		t.Errorf("rerank eval: %v\n%s\nwant %s", err, out, want)
	}

	values["e"] = "garbage"
	out, err = runCLI(t, "rerank", "--data", data, "--scorer-url", srv.URL)
	if err == nil || !strings.Contains(err.Error(), "candidate e: bad score") {
		t.Errorf("on-error stop: err %v, want one naming candidate e\n%s", err, out)
	}
	out, err = runCLI(t, "rerank", "--data", data, "--scorer-url", srv.URL, "--on-error", "skip")
	if err != nil || !strings.Contains(out, "orchard rerank: skip: candidate e: bad score") || strings.Count(out, `"chosen"`) != 3 {
		t.Errorf("on-error skip: err %v\n%s", err, out)
	}
}

// TestExportValue exports the reranking candidates as value pairs: one
// line per candidate, its prompt and answer, its outcome.
func TestExportValue(t *testing.T) {
	data := t.TempDir()
	seedRerankStore(t, data, [][3]string{{"a", "t1", "0"}, {"b", "t1", "1"}})
	out, err := runCLI(t, "export", "--format", "value", "--data", data)
	want := `{"schema":"orchard.value/v1","episode_id":"a","task_id":"t1","group_id":null,"call_id":"call-a","turn":0,"segment":0,` +
		`"messages":[{"role":"user","content":"solve t1"},{"role":"assistant","content":"answer-a"}],"input_ids":null,"status":"failure","outcome":0,"success":false}` + "\n" +
		`{"schema":"orchard.value/v1","episode_id":"b","task_id":"t1","group_id":null,"call_id":"call-b","turn":0,"segment":0,` +
		`"messages":[{"role":"user","content":"solve t1"},{"role":"assistant","content":"answer-b"}],"input_ids":null,"status":"success","outcome":1,"success":true}` + "\n"
	if err != nil || out != want {
		t.Errorf("export --format value: %v\n%s\nwant\n%s", err, out, want)
	}
}

// TestRerankRulesScorer ranks candidates by the built-in reward rules: the
// one whose completion is empty (rule empty-completion, a negative delta)
// loses to the one that answered, and eval reports on the same totals.
func TestRerankRulesScorer(t *testing.T) {
	data := t.TempDir()
	seedRerankStore(t, data, [][3]string{{"a", "t1", "1"}, {"b", "t1", "0"}})
	st, err := embedded.Open(data, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	empty := &recorder.Call{Schema: "orchard.call/v1", EpisodeID: "b", CallID: "call-b2", API: recorder.APIChatCompletions,
		Method: "POST", Path: "/v1/chat/completions", Model: "m", StartedAt: start, EndedAt: start, Status: 200, EndReason: recorder.EndDone,
		Request:  json.RawMessage(`{"model":"m","messages":[{"role":"user","content":"solve t1"},{"role":"assistant","content":"answer-b"},{"role":"user","content":"go on"}]}`),
		Response: json.RawMessage(`{"id":"y","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}`)}
	if err := st.WriteCalls(context.Background(), []*recorder.Call{empty}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	out, err := runCLI(t, "rerank", "--data", data, "--scorer", "rules")
	if err != nil {
		t.Fatalf("rerank --scorer rules: %v\n%s", err, out)
	}
	if got := gjson.Get(out, "chosen").String(); got != "a" {
		t.Errorf("rules scorer chose %q, want a (b has an empty completion)\n%s", got, out)
	}
	if !strings.Contains(out, "empty-completion") {
		t.Errorf("rules scorer output lacks the empty-completion feature\n%s", out)
	}
}
