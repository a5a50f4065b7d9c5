package envd_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/agent"
	"github.com/orchard-rl/orchard/envd/client"
)

// agentBackend runs each sandbox as an in-process agent served over a
// real loopback socket; it lets these tests cover the manager and the
// API without jails (the local package tests those).
type agentBackend struct {
	t       *testing.T
	mu      sync.Mutex
	servers map[string]*httptest.Server
	agents  map[string]*agent.Server
	deleted []string
}

func newAgentBackend(t *testing.T) *agentBackend {
	b := &agentBackend{t: t, servers: map[string]*httptest.Server{}, agents: map[string]*agent.Server{}}
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for id := range b.servers {
			b.servers[id].Close()
			b.agents[id].Close()
		}
	})
	return b
}

func (b *agentBackend) Create(_ context.Context, id string, spec *envd.Spec) (*envd.Instance, error) {
	a := agent.New(agent.Options{Workdir: b.t.TempDir(), Token: "tok-" + id})
	ts := httptest.NewServer(a)
	b.mu.Lock()
	b.servers[id], b.agents[id] = ts, a
	b.mu.Unlock()
	return &envd.Instance{BaseURL: ts.URL, Transport: http.DefaultTransport, Token: "tok-" + id, Workdir: spec.Workdir}, nil
}

func (b *agentBackend) Delete(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ts, ok := b.servers[id]; ok {
		ts.Close()
		b.agents[id].Close()
		delete(b.servers, id)
		delete(b.agents, id)
	}
	b.deleted = append(b.deleted, id)
	return nil
}

func (b *agentBackend) Sweep(context.Context, func(string) bool) (int, error) { return 0, nil }

// fakeProxy stands in for the proxy's episode API and
// records what envd sent it.
type fakeProxy struct {
	*httptest.Server
	mu       sync.Mutex
	created  []map[string]any
	finished map[string]envd.Outcome
	auth     []string
}

func newFakeProxy(t *testing.T) *fakeProxy {
	p := &fakeProxy{finished: map[string]envd.Outcome{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orchard/v1/episodes", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		p.mu.Lock()
		p.created = append(p.created, body)
		p.auth = append(p.auth, r.Header.Get("Authorization"))
		id := "ep-" + body["task_id"].(string)
		p.mu.Unlock()
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "token": "etok", "env": map[string]string{
			"OPENAI_BASE_URL": p.URL + "/e/" + id + "/v1", "OPENAI_API_KEY": "etok",
			"ANTHROPIC_BASE_URL": p.URL + "/e/" + id, "ANTHROPIC_API_KEY": "etok"}})
	})
	mux.HandleFunc("POST /orchard/v1/episodes/{id}/finish", func(w http.ResponseWriter, r *http.Request) {
		var o envd.Outcome
		_ = json.NewDecoder(r.Body).Decode(&o)
		p.mu.Lock()
		p.finished[r.PathValue("id")] = o
		p.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"id": r.PathValue("id"), "status": o.Status, "reward": o.Reward})
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	return p
}

type fixture struct {
	m     *envd.Manager
	b     *agentBackend
	url   string
	c     *client.Client
	clock *fakeClock
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newFixture(t *testing.T, opts envd.Options, token string) *fixture {
	t.Helper()
	f := &fixture{b: newAgentBackend(t), clock: &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
	opts.Backend, opts.Now = f.b, f.clock.Now
	f.m = envd.NewManager(opts)
	ts := httptest.NewServer(envd.NewServer(envd.ServerOptions{Manager: f.m, Token: token}))
	t.Cleanup(ts.Close)
	f.url = ts.URL
	f.c = client.New(client.Options{BaseURL: ts.URL, Token: token})
	return f
}

func TestEpisodeWiring(t *testing.T) {
	t.Parallel()
	p := newFakeProxy(t)
	f := newFixture(t, envd.Options{Episodes: envd.NewEpisodeClient(p.URL, "admin-secret", nil)}, "")
	ctx := context.Background()
	sb, err := f.c.Create(ctx, envd.Spec{Env: map[string]string{"A": "1", "OPENAI_API_KEY": "overridden"},
		Episode: &envd.EpisodeSpec{TaskID: "t1", GroupID: "g1", Metadata: map[string]any{"k": "v"}}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Info.EpisodeID != "ep-t1" {
		t.Errorf("episode id = %q, want ep-t1", sb.Info.EpisodeID)
	}
	res, err := sb.Exec(ctx, envd.ExecRequest{Shell: `echo "$A $ORCHARD_EPISODE_ID $OPENAI_API_KEY $OPENAI_BASE_URL $B"`, Env: map[string]string{"B": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "1 ep-t1 etok " + p.URL + "/e/ep-t1/v1 2\n"
	if res.Stdout != want {
		t.Errorf("exec env = %q, want %q", res.Stdout, want)
	}
	del, err := sb.Finish(ctx, envd.Outcome{Reward: 0.75, Status: "success", Info: map[string]any{"tests": 3}})
	if err != nil {
		t.Fatal(err)
	}
	if string(del.Episode) != `{"id":"ep-t1","reward":0.75,"status":"success"}` {
		t.Errorf("delete episode = %s", del.Episode)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if got := p.finished["ep-t1"]; got.Reward != 0.75 || got.Status != "success" || got.Info["tests"] != float64(3) {
		t.Errorf("finish = %+v", got)
	}
	if p.auth[0] != "Bearer admin-secret" || p.created[0]["group_id"] != "g1" || p.created[0]["metadata"].(map[string]any)["k"] != "v" {
		t.Errorf("create episode = %v auth %q", p.created[0], p.auth[0])
	}
}

func TestEpisodeCreateFailure(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(401)
		_, _ = io.WriteString(w, `{"error":{"message":"bad admin token","type":"unauthorized"}}`)
	}))
	defer down.Close()
	f := newFixture(t, envd.Options{Episodes: envd.NewEpisodeClient(down.URL, "wrong", nil)}, "")
	_, err := f.c.Create(context.Background(), envd.Spec{Episode: &envd.EpisodeSpec{TaskID: "t"}})
	var e *envd.Error
	if !errorsAs(err, &e) || e.Status != 502 || !strings.Contains(e.Message, "bad admin token") {
		t.Errorf("create with failing proxy = %v, want 502 mentioning the proxy's message", err)
	}
	if n := len(f.m.List()); n != 0 {
		t.Errorf("sandboxes after failed create = %d, want 0", n)
	}
}

func TestReap(t *testing.T) {
	t.Parallel()
	p := newFakeProxy(t)
	f := newFixture(t, envd.Options{Episodes: envd.NewEpisodeClient(p.URL, "", nil), IdleTimeout: time.Minute}, "")
	ctx := context.Background()
	short, _ := f.c.Create(ctx, envd.Spec{TTL: envd.Duration(30 * time.Second), Episode: &envd.EpisodeSpec{TaskID: "short"}})
	idle, _ := f.c.Create(ctx, envd.Spec{TTL: envd.Duration(time.Hour), Episode: &envd.EpisodeSpec{TaskID: "idle"}})
	busy, _ := f.c.Create(ctx, envd.Spec{TTL: envd.Duration(time.Hour)})
	f.clock.Add(20 * time.Second)
	if got := f.m.Reap(ctx, f.clock.Now()); len(got) != 0 {
		t.Fatalf("reap at 20s = %v, want none", got)
	}
	if _, err := busy.Exec(ctx, envd.ExecRequest{Shell: "true"}); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(15 * time.Second) // 35 s: short's TTL is over
	if got := f.m.Reap(ctx, f.clock.Now()); len(got) != 1 || got[0] != short.ID() {
		t.Fatalf("reap at 35s = %v, want [%s]", got, short.ID())
	}
	f.clock.Add(30 * time.Second) // 65 s: idle unused for 65 s, busy for 45 s
	if got := f.m.Reap(ctx, f.clock.Now()); len(got) != 1 || got[0] != idle.ID() {
		t.Fatalf("reap at 65s = %v, want [%s]", got, idle.ID())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if o := p.finished["ep-short"]; o.Status != "timeout" || o.Info["reason"] != "ttl" {
		t.Errorf("short finished with %+v, want timeout/ttl", o)
	}
	if o := p.finished["ep-idle"]; o.Status != "timeout" || o.Info["reason"] != "idle" {
		t.Errorf("idle finished with %+v, want timeout/idle", o)
	}
	if _, err := f.m.Get(busy.ID()); err != nil {
		t.Errorf("busy sandbox reaped: %v", err)
	}
}

func TestServerToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, envd.Options{}, "envd-secret")
	if _, err := f.c.List(context.Background()); err != nil {
		t.Errorf("List with token: %v", err)
	}
	res, err := http.Get(f.url + "/envd/v1/sandboxes")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 {
		t.Errorf("List without token = %d, want 401", res.StatusCode)
	}
}

func TestMaxSandboxes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, envd.Options{MaxSandboxes: 1}, "")
	ctx := context.Background()
	if _, err := f.c.Create(ctx, envd.Spec{}); err != nil {
		t.Fatal(err)
	}
	_, err := f.c.Create(ctx, envd.Spec{})
	var e *envd.Error
	if !errorsAs(err, &e) || e.Status != 503 {
		t.Errorf("second create = %v, want 503", err)
	}
}
