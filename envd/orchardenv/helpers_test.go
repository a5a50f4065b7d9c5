package orchardenv_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/agent"
	"github.com/orchard-rl/orchard/envd/orchardenv"
)

// agentBackend runs each sandbox as a real agent on its own loopback
// socket, in process, with a temporary work directory: the API and the
// Manager under it are real, the jail is left to the local package.
type agentBackend struct {
	t  *testing.T
	mu sync.Mutex
	ag map[string]*agent.Server
	ts map[string]*httptest.Server
}

func (b *agentBackend) Create(_ context.Context, id string, spec *envd.Spec) (*envd.Instance, error) {
	a := agent.New(agent.Options{Workdir: b.t.TempDir()})
	ts := httptest.NewServer(a)
	b.mu.Lock()
	b.ag[id], b.ts[id] = a, ts
	b.mu.Unlock()
	return &envd.Instance{BaseURL: ts.URL, Transport: http.DefaultTransport, Workdir: spec.Workdir}, nil
}

func (b *agentBackend) Delete(_ context.Context, id string) error {
	b.mu.Lock()
	a, ts := b.ag[id], b.ts[id]
	delete(b.ag, id)
	delete(b.ts, id)
	b.mu.Unlock()
	if ts != nil {
		ts.Close()
		a.Close()
	}
	return nil
}

func (b *agentBackend) Sweep(context.Context, func(string) bool) (int, error) { return 0, nil }

// api is the Orchard Env API on a Manager over a real socket.
type api struct {
	url string
	key string
}

func newAPI(t *testing.T, keys ...string) *api {
	t.Helper()
	b := &agentBackend{t: t, ag: map[string]*agent.Server{}, ts: map[string]*httptest.Server{}}
	m := envd.NewManager(envd.Options{Backend: b, BackendName: "local"})
	h := orchardenv.New(orchardenv.Options{Manager: m, APIKeys: keys})
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.Close()
		h.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = m.Start(ctx) // canceled: deletes every live sandbox
	})
	a := &api{url: ts.URL}
	if len(keys) > 0 {
		a.key = keys[0]
	}
	return a
}

// do sends a JSON body (nil for none) and returns the status and the
// decoded JSON answer.
func (a *api) do(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, a.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if a.key != "" {
		req.Header.Set("X-API-Key", a.key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: answer %d is not a JSON object: %q", method, path, res.StatusCode, raw)
	}
	return res.StatusCode, out
}

// must is do that fails the test unless the status is want.
func (a *api) must(t *testing.T, want int, method, path string, body any) map[string]any {
	t.Helper()
	status, out := a.do(t, method, path, body)
	if status != want {
		t.Fatalf("%s %s = %d %v, want %d", method, path, status, out, want)
	}
	return out
}

// sandbox creates a sandbox and returns its id.
func (a *api) sandbox(t *testing.T) string {
	t.Helper()
	out := a.must(t, 200, "POST", "/sandboxes", map[string]any{"image": "default", "block_network": false})
	return out["sandbox_id"].(string)
}
