package episodes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/proxy/episodes"
	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/embedded"
)

// secureEnv is a proxy in secure mode with the episode API on an embedded
// store, an upstream key, metrics and a log buffer.
func secureEnv(t *testing.T) (*env, *episodes.Signer, *bytes.Buffer) {
	t.Helper()
	st, err := embedded.Open(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	signer := newSigner(t)
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := mounted(t, episodes.Options{Store: st, Signer: signer, Logger: lg}, func(o *proxy.Options) {
		o.Registry = prometheus.NewRegistry()
		// Store every record, as the pipeline would, before the test sees it.
		inner := o.Sink
		o.Sink = proxy.SinkFunc(func(c *recorder.Call) {
			if err := st.WriteCalls(context.Background(), []*recorder.Call{c}); err != nil {
				t.Errorf("store: %v", err)
			}
			inner.Record(c)
		})
		o.Logger = lg
	})
	return e, signer, &logs
}

func createEpisode(t *testing.T, e *env, body string) episodes.Created {
	t.Helper()
	r := do(t, "POST", e.Proxy.URL+"/orchard/v1/episodes", map[string]string{"Authorization": "Bearer " + adminToken}, []byte(body))
	if r.Status != http.StatusCreated {
		t.Fatalf("create episode: %d %s", r.Status, r.Body)
	}
	var ce episodes.Created
	if err := json.Unmarshal(r.Body, &ce); err != nil {
		t.Fatal(err)
	}
	return ce
}

// TestSecureMode: only a valid token of the episode a call names gets
// through; everything else is a 401 with nothing recorded and nothing sent
// upstream. The upstream key reaches the upstream and nowhere else.
func TestSecureMode(t *testing.T) {
	e, signer, logs := secureEnv(t)
	a := createEpisode(t, e, `{"task_id":"t1","group_id":"g1","metadata":{"k":"v"}}`)
	b := createEpisode(t, e, `{"task_id":"t1"}`)
	if a.Env["OPENAI_BASE_URL"] != e.Proxy.URL+"/e/"+a.ID+"/v1" || a.Env["ANTHROPIC_BASE_URL"] != e.Proxy.URL+"/e/"+a.ID ||
		a.Env["OPENAI_API_KEY"] != a.Token || a.Env["ANTHROPIC_API_KEY"] != a.Token {
		t.Fatalf("env block %v", a.Env)
	}
	chat := []byte(`{"model":"text","messages":[{"role":"user","content":"hi"}]}`)
	call := func(url string, hdr map[string]string) reply {
		return do(t, "POST", url+"/chat/completions", hdr, chat)
	}
	ok := call(a.Env["OPENAI_BASE_URL"], map[string]string{"Authorization": "Bearer " + a.Token, "User-Agent": "good"})
	if ok.Status != 200 {
		t.Fatalf("valid token: %d %s", ok.Status, ok.Body)
	}
	c := e.Sink.ForHarness(t, "good")
	if c.EpisodeID != a.ID {
		t.Fatalf("recorded under %q, want %q", c.EpisodeID, a.ID)
	}
	sent := e.Up.Requests()
	if got := sent[len(sent)-1].Header.Get("Authorization"); got != "Bearer "+upstreamKey {
		t.Fatalf("upstream got Authorization %q, want the upstream key", got)
	}
	expired := signer.Issue(a.ID, -time.Minute)
	forged := a.Token[:len(a.Token)-4] + "AAAA"
	bad := []struct {
		name string
		url  string
		hdr  map[string]string
	}{
		{"no token", e.Proxy.URL + "/e/" + a.ID + "/v1", nil},
		{"client key", e.Proxy.URL + "/e/" + a.ID + "/v1", map[string]string{"Authorization": "Bearer sk-client"}},
		{"forged", e.Proxy.URL + "/e/" + a.ID + "/v1", map[string]string{"Authorization": "Bearer " + forged}},
		{"expired", e.Proxy.URL + "/e/" + a.ID + "/v1", map[string]string{"Authorization": "Bearer " + expired}},
		{"token of A, path of B", e.Proxy.URL + "/e/" + b.ID + "/v1", map[string]string{"Authorization": "Bearer " + a.Token}},
		{"token of A, header of B", e.Proxy.URL + "/v1", map[string]string{"X-Api-Key": a.Token, proxy.EpisodeHeader: b.ID}},
		{"admin token as key", e.Proxy.URL + "/v1", map[string]string{"Authorization": "Bearer " + adminToken}},
	}
	before := len(e.Up.Requests())
	for _, tt := range bad {
		r := call(tt.url, tt.hdr)
		if r.Status != http.StatusUnauthorized || !strings.Contains(string(r.Body), `"message"`) {
			t.Errorf("%s: %d %s, want 401 with a JSON error", tt.name, r.Status, r.Body)
		}
	}
	if n := len(e.Up.Requests()) - before; n != 0 {
		t.Errorf("%d refused calls reached the upstream", n)
	}

	// Finishing revokes the token.
	fin := do(t, "POST", e.Proxy.URL+"/orchard/v1/episodes/"+a.ID+"/finish",
		map[string]string{"Authorization": "Bearer " + adminToken}, []byte(`{"reward":1.5,"status":"success","info":{"tests":3}}`))
	if fin.Status != 200 {
		t.Fatalf("finish: %d %s", fin.Status, fin.Body)
	}
	if r := call(a.Env["OPENAI_BASE_URL"], map[string]string{"Authorization": "Bearer " + a.Token}); r.Status != http.StatusUnauthorized {
		t.Errorf("token of a finished episode: %d, want 401", r.Status)
	}
	// The admin API needs the admin token.
	for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer " + a.Token}} {
		if r := do(t, "GET", e.Proxy.URL+"/orchard/v1/episodes", hdr, nil); r.Status != http.StatusUnauthorized {
			t.Errorf("episode list with %v: %d, want 401", hdr, r.Status)
		}
	}
	if n := e.Sink.Pending(); n != 0 {
		t.Errorf("%d records of refused calls", n)
	}

	metrics := do(t, "GET", e.Proxy.URL+"/metrics", nil, nil)
	recordJSON, _ := json.Marshal(c)
	for name, where := range map[string][]byte{"client reply": ok.Body, "record": recordJSON, "logs": logs.Bytes(), "metrics": metrics.Body} {
		if bytes.Contains(where, []byte(upstreamKey)) {
			t.Errorf("upstream key found in %s", name)
		}
	}
	if !bytes.Contains(metrics.Body, []byte("orchard_proxy_requests_total")) {
		t.Errorf("/metrics lacks the request counter")
	}
}

// TestEpisodeAPI covers the episode lifecycle: list filters, get with
// calls, events in order, finish once, clear errors.
func TestEpisodeAPI(t *testing.T) {
	e, _, _ := secureEnv(t)
	admin := map[string]string{"Authorization": "Bearer " + adminToken}
	a := createEpisode(t, e, `{"task_id":"t1","group_id":"g1"}`)
	createEpisode(t, e, `{"task_id":"t2","group_id":"g1"}`)
	if r := do(t, "POST", a.Env["OPENAI_BASE_URL"]+"/chat/completions", map[string]string{"Authorization": "Bearer " + a.Token, "User-Agent": "api"},
		[]byte(`{"model":"text","messages":[{"role":"user","content":"hi"}]}`)); r.Status != 200 {
		t.Fatalf("call: %d", r.Status)
	}
	e.Sink.ForHarness(t, "api")
	for i, ev := range []string{`{"type":"test_result","passed":3}`, `{"type":"lint","ok":true}`} {
		r := do(t, "POST", e.Proxy.URL+"/orchard/v1/episodes/"+a.ID+"/events", admin, []byte(ev))
		if r.Status != http.StatusCreated || !strings.Contains(string(r.Body), `"seq":`+string(rune('1'+i))) {
			t.Fatalf("event %d: %d %s", i, r.Status, r.Body)
		}
	}
	evs := do(t, "GET", e.Proxy.URL+"/orchard/v1/episodes/"+a.ID+"/events", admin, nil)
	if !strings.Contains(string(evs.Body), `"type":"test_result"`) || strings.Index(string(evs.Body), "test_result") > strings.Index(string(evs.Body), "lint") {
		t.Errorf("events: %s", evs.Body)
	}
	list := do(t, "GET", e.Proxy.URL+"/orchard/v1/episodes?task_id=t1", admin, nil)
	var page struct {
		Episodes []recorder.EpisodeSummary `json:"episodes"`
	}
	if err := json.Unmarshal(list.Body, &page); err != nil || len(page.Episodes) != 1 || page.Episodes[0].ID != a.ID {
		t.Fatalf("list task_id=t1: %s", list.Body)
	}
	bad := []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/orchard/v1/episodes", `{"task":"typo"}`, 400},
		{"POST", "/orchard/v1/episodes", `{"id":"has space"}`, 400},
		{"POST", "/orchard/v1/episodes", `{"id":"` + a.ID + `"}`, 409},
		{"POST", "/orchard/v1/episodes/" + a.ID + "/finish", `{"status":"great"}`, 400},
		{"POST", "/orchard/v1/episodes/nope/finish", `{"status":"success"}`, 404},
		{"POST", "/orchard/v1/episodes/" + a.ID + "/events", `{"no_type":1}`, 400},
		{"GET", "/orchard/v1/episodes?limit=-1", ``, 400},
	}
	for _, tt := range bad {
		r := do(t, tt.method, e.Proxy.URL+tt.path, admin, []byte(tt.body))
		if r.Status != tt.status || !strings.Contains(string(r.Body), `"message"`) {
			t.Errorf("%s %s %s: %d %s, want %d with a message", tt.method, tt.path, tt.body, r.Status, r.Body, tt.status)
		}
	}
	fin := func() int {
		return do(t, "POST", e.Proxy.URL+"/orchard/v1/episodes/"+a.ID+"/finish", admin, []byte(`{"reward":0.5,"status":"failure"}`)).Status
	}
	if s1, s2 := fin(), fin(); s1 != 200 || s2 != http.StatusConflict {
		t.Errorf("finish twice: %d, %d; want 200, 409", s1, s2)
	}
	got := do(t, "GET", e.Proxy.URL+"/orchard/v1/episodes/"+a.ID+"?calls=true", admin, nil)
	var sum struct {
		recorder.EpisodeSummary
		CallList []recorder.Call `json:"call_list"`
	}
	if err := json.Unmarshal(got.Body, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Status != "failure" || sum.Reward == nil || *sum.Reward != 0.5 || sum.Calls != 1 || len(sum.CallList) != 1 || sum.TaskID != "t1" {
		t.Errorf("episode: %s", got.Body)
	}
}
