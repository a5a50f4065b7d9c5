package loadgen

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func TestPercentile(t *testing.T) {
	seq := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i + 1)
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", seq(1), 99, 1},
		{"p50 of 10", seq(10), 50, 5},
		{"p90 of 10", seq(10), 90, 9},
		{"p99 of 10", seq(10), 99, 10},
		{"p99 of 1000", seq(1000), 99, 990},
		{"p100", seq(7), 100, 7},
		{"tiny p", seq(100), 0.001, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.in, tt.p); got != tt.want {
				t.Errorf("Percentile(%d values, %v) = %v, want %v", len(tt.in), tt.p, got, tt.want)
			}
		})
	}
}

func TestDistOf(t *testing.T) {
	got := distOf([]time.Duration{4 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond})
	want := Dist{P50: 2, P90: 4, P99: 4, Max: 4, Mean: 2.5}
	if got != want {
		t.Errorf("distOf = %+v, want %+v", got, want)
	}
}

func TestClassify(t *testing.T) {
	want := []byte("data: {\"a\":1}\n\ndata: [DONE]\n\n")
	tests := []struct {
		name string
		got  string
		want Outcome
	}{
		{"exact", string(want), OK},
		{"no done", "data: {\"a\":1}\n\n", Truncated},
		{"cut inside done", "data: {\"a\":1}\n\ndata: [DO", Truncated},
		{"done without blank line", "data: {\"a\":1}\n\ndata: [DONE]\n", Truncated},
		{"done glued to an open event", "data: {\"a\":1}\ndata: [DONE]\n\n", Truncated},
		{"empty", "", Truncated},
		{"changed byte", "data: {\"a\":2}\n\ndata: [DONE]\n\n", Corrupt},
		{"missing event", "data: [DONE]\n\n", Corrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify([]byte(tt.got), want); got != tt.want {
				t.Errorf("Classify(%q) = %v, want %v", tt.got, got, tt.want)
			}
		})
	}
}

func TestScenarioShape(t *testing.T) {
	sc, r := renderDefault(t)
	bodies, asking := sc.Requests("run-w0-e0", false), sc.Requests("run-w0-e0", true)
	if len(bodies) != sc.Turns || len(asking) != sc.Turns {
		t.Fatalf("%d and %d request bodies for %d turns", len(bodies), len(asking), sc.Turns)
	}
	for k, body := range bodies {
		if want := bytes.Replace(body, []byte(streamTail), []byte(idsTail), 1); !bytes.Equal(asking[k], want) {
			t.Errorf("turn %d: the body asking for ids is not the plain one with the ids tail", k)
		}
		if !gjson.ValidBytes(body) {
			t.Fatalf("turn %d: request is not valid JSON", k)
		}
		if got := len(gjson.GetBytes(body, "messages").Array()); got != 2+2*k {
			t.Errorf("turn %d: %d messages, want %d", k, got, 2+2*k)
		}
		if n := len(body); n < sc.PromptMin*9/10 || n > sc.PromptMax*3/2 {
			t.Errorf("turn %d: request of %d bytes, want about %d..%d", k, n, sc.PromptMin, sc.PromptMax)
		}
		events := len(r.events[variant{usage: true}][k])
		// role chunk + token chunks + usage chunk + [DONE]
		if events < sc.ChunksMin || events > sc.ChunksMax+4 {
			t.Errorf("turn %d: %d events, want %d..%d", k, events, sc.ChunksMin, sc.ChunksMax+4)
		}
	}
}

// renderDefault renders the default scenario's streams, as the upstream does.
func renderDefault(t *testing.T) (Scenario, *rendered) {
	t.Helper()
	var sc Scenario
	sc.Defaults()
	r, err := sc.render()
	if err != nil {
		t.Fatal(err)
	}
	return sc, r
}

// TestScenarioBodies holds Bodies to the streams the upstream serves: each
// turn's body in the variant of the fields asked for, byte for byte.
func TestScenarioBodies(t *testing.T) {
	sc, r := renderDefault(t)
	for _, v := range variants() {
		bodies, err := sc.Bodies(v.usage, v.tokenIDs, v.logprobs)
		if err != nil {
			t.Fatal(err)
		}
		if len(bodies) != sc.Turns {
			t.Fatalf("%+v: %d bodies for %d turns", v, len(bodies), sc.Turns)
		}
		for k, b := range bodies {
			if !bytes.Equal(b, r.bodies[v][k]) {
				t.Errorf("%+v turn %d: %d bytes, the upstream serves %d", v, k, len(b), len(r.bodies[v][k]))
			}
		}
	}
}

// TestThroughBareProxy runs the closed and the open loop through the bare
// proxy to the upstream and expects every stream intact.
func TestThroughBareProxy(t *testing.T) {
	sc := Scenario{Turns: 3, ChunksMin: 20, ChunksMax: 40}
	sc.Defaults()
	up, err := NewUpstream(sc)
	if err != nil {
		t.Fatal(err)
	}
	us := httptest.NewServer(up)
	defer us.Close()
	u, _ := url.Parse(us.URL)
	ps := httptest.NewServer(NewBareProxy(u))
	defer ps.Close()
	c, err := NewClient(ps.URL, sc, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, l := range []Load{
		{Concurrency: 4, Duration: 200 * time.Millisecond, Run: "closed"},
		{Rate: 100, Duration: 200 * time.Millisecond, Run: "open"},
	} {
		marks := 0
		l.Mark = func(bool) { marks++ }
		m := Run(context.Background(), c, l)
		s := m.Summarize()
		if s.Errors != 0 || s.Requests == 0 || marks != 2 {
			t.Errorf("Run(%+v): %d samples, %d errors %v, %d marks; want samples, no errors, 2 marks",
				l, s.Requests, s.Errors, s.ErrorLog, marks)
		}
	}
}

// TestTruncatedStreamIsError cuts every stream short and expects the
// client to count each as truncated.
func TestTruncatedStreamIsError(t *testing.T) {
	sc := Scenario{Turns: 1, ChunksMin: 10, ChunksMax: 10}
	sc.Defaults()
	up, err := NewUpstream(sc)
	if err != nil {
		t.Fatal(err)
	}
	for v, evs := range up.r.events {
		for k := range evs {
			up.r.events[v][k] = evs[k][:len(evs[k])-1] // drop data: [DONE]
		}
	}
	us := httptest.NewServer(up)
	defer us.Close()
	c, err := NewClient(us.URL, sc, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b Buffers
	if got := c.Do(context.Background(), &b, "ep", 0, time.Now()); got.Outcome != Truncated {
		t.Errorf("Do on a stream without [DONE] = %v (%s), want truncated", got.Outcome, got.Err)
	}
}

// TestIDsClientThroughBareProxy runs the b+ids client through the bare
// proxy: it asks for token ids and logprobs, and the stream it expects (and
// gets, byte for byte) carries them (logprobs not with NoLogprobs).
func TestIDsClientThroughBareProxy(t *testing.T) {
	for _, noLP := range []bool{false, true} {
		sc := Scenario{Turns: 2, ChunksMin: 10, ChunksMax: 20, NoLogprobs: noLP}
		sc.Defaults()
		up, err := NewUpstream(sc)
		if err != nil {
			t.Fatal(err)
		}
		us := httptest.NewServer(up)
		u, _ := url.Parse(us.URL)
		ps := httptest.NewServer(NewBareProxy(u))
		c, err := NewIDsClient(ps.URL, sc, 1)
		if err != nil {
			t.Fatal(err)
		}
		checkIDsClient(t, c, sc)
		c.Close()
		ps.Close()
		us.Close()
	}
}

func checkIDsClient(t *testing.T, c *Client, sc Scenario) {
	t.Helper()
	if body := c.q.appendBody(nil, "ep", 1); !gjson.GetBytes(body, "return_token_ids").Bool() || !gjson.GetBytes(body, "logprobs").Bool() {
		t.Errorf("ids client's request does not ask for token ids and logprobs: %s", body[len(body)-120:])
	}
	for k, want := range c.want {
		ids, lp := bytes.Contains(want, []byte(`"token_ids":[`)), bytes.Contains(want, []byte(`"logprobs":{"content":[`))
		if !ids || lp == sc.NoLogprobs {
			t.Errorf("NoLogprobs %v, turn %d: the expected stream has token ids %v, logprobs %v", sc.NoLogprobs, k, ids, lp)
		}
	}
	var b Buffers
	for k := range sc.Turns {
		if got := c.Do(context.Background(), &b, "ep", k, time.Now()); got.Outcome != OK {
			t.Errorf("NoLogprobs %v, turn %d through the bare proxy: %v (%s)", sc.NoLogprobs, k, got.Outcome, got.Err)
		}
	}
}

// TestUpstreamModels expects GET /v1/models in vLLM's shape.
func TestUpstreamModels(t *testing.T) {
	up, err := NewUpstream(Scenario{Turns: 1, ChunksMin: 8, ChunksMax: 8})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	up.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	body := w.Body.Bytes()
	if w.Code != http.StatusOK || !gjson.ValidBytes(body) {
		t.Fatalf("GET /v1/models = %d %s, want 200 and JSON", w.Code, body)
	}
	for path, want := range map[string]string{
		"object": "list", "data.#": "1", "data.0.id": Model, "data.0.object": "model",
		"data.0.owned_by": "vllm", "data.0.root": Model, "data.0.max_model_len": "32768",
		"data.0.permission.0.object": "model_permission", "data.0.parent": "",
	} {
		if got := gjson.GetBytes(body, path).String(); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	if gjson.GetBytes(body, "data.0.created").Int() <= 0 {
		t.Errorf("data.0.created missing: %s", body)
	}
}

// TestLifecycle: a closed-loop client creates each episode before its
// first turn and finishes it after its last, once each; a failing call
// counts as a Lifecycle outcome, never as a sent request.
func TestLifecycle(t *testing.T) {
	sc := Scenario{Turns: 3, ChunksMin: 20, ChunksMax: 40}
	c := upstreamClient(t, sc)
	var mu sync.Mutex
	state := map[string]string{} // episode -> "created" or "finished"
	create := func(_ context.Context, ep string) error {
		mu.Lock()
		defer mu.Unlock()
		if state[ep] != "" {
			t.Errorf("episode %s created again (%s)", ep, state[ep])
		}
		state[ep] = "created"
		return nil
	}
	finish := func(_ context.Context, ep string) error {
		mu.Lock()
		defer mu.Unlock()
		if state[ep] != "created" {
			t.Errorf("episode %s finished while %q", ep, state[ep])
		}
		state[ep] = "finished"
		return errors.New("no episode API here")
	}
	m := Run(context.Background(), c, Load{Concurrency: 4, Duration: 300 * time.Millisecond, Run: "life", Create: create, Finish: finish})
	open, finished := 0, 0
	for _, s := range state {
		if s == "created" {
			open++
		} else {
			finished++
		}
	}
	if finished == 0 || open > 4 {
		t.Fatalf("%d episodes finished, %d left open by 4 clients", finished, open)
	}
	// Every finish failed; every finished episode had its 3 turns, an open
	// one fewer.
	if ok := m.Outcomes[OK]; m.Outcomes[Lifecycle] != finished || ok < 3*finished || ok > 3*(finished+open) {
		t.Fatalf("outcomes %v for %d episodes finished, %d open", m.Outcomes, finished, open)
	}
}

// TestEpisodeAPICalls holds Create and Finish to the episode API's routes
// and bodies.
func TestEpisodeAPICalls(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.EscapedPath()+" "+string(body))
		mu.Unlock()
		if r.URL.Path == "/orchard/v1/episodes" {
			w.WriteHeader(http.StatusCreated)
			return
		}
		if r.URL.Path == "/orchard/v1/episodes/gone/finish" {
			http.Error(w, `{"error":{"message":"no such episode"}}`, http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, Scenario{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Create(ctx, "ep-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, "ep-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, "gone"); err == nil || !strings.Contains(err.Error(), "status 404") {
		t.Fatalf("finish of an unknown episode: %v, want its 404", err)
	}
	want := []string{
		`POST /orchard/v1/episodes {"id":"ep-1"}`,
		`POST /orchard/v1/episodes/ep-1/finish {"status":"success","reward":1}`,
		`POST /orchard/v1/episodes/gone/finish {"status":"success","reward":1}`,
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// upstreamClient returns a client of a scripted upstream serving sc, both
// closed when t ends.
func upstreamClient(t *testing.T, sc Scenario) *Client {
	t.Helper()
	sc.Defaults()
	up, err := NewUpstream(sc)
	if err != nil {
		t.Fatal(err)
	}
	us := httptest.NewServer(up)
	t.Cleanup(us.Close)
	c, err := NewClient(us.URL, sc, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
