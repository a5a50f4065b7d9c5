package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/client"
	"github.com/orchard-rl/orchard/internal/redistest"
)

// probeModeEnv makes the test binary, run inside a jail as
// /.orchard/agent, a network probe: each argument "METHOD URL" or
// "TCP HOST:PORT" prints one line, the HTTP status or "open", else "err".
const probeModeEnv = "ORCHARD_TEST_PROBE"

func runProbe(args []string) int {
	hc := &http.Client{Timeout: 3 * time.Second}
	for _, a := range args {
		method, target, _ := strings.Cut(a, " ")
		if method == "TCP" {
			c, err := net.DialTimeout("tcp", target, 3*time.Second)
			if err != nil {
				fmt.Println("err")
				continue
			}
			c.Close()
			fmt.Println("open")
			continue
		}
		req, _ := http.NewRequest(method, target, strings.NewReader(`{"reward":1,"status":"success"}`))
		req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
		res, err := hc.Do(req)
		if err != nil {
			fmt.Println("err")
			continue
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		fmt.Println(res.StatusCode)
	}
	return 0
}

// fakeProxy is the proxy's episode API and one model route, with an
// admin token, on a loopback port: what envd talks to and what a sandbox
// must not reach beyond its own episode's model routes.
type fakeProxy struct {
	*httptest.Server
	admin string

	mu       sync.Mutex // guards following
	calls    []string   // "episode path" of model calls
	finished []string   // episode ids finished with the probe's reward
}

func newFakeProxy(t testing.TB) *fakeProxy {
	t.Helper()
	p := &fakeProxy{admin: "escape-admin"}
	mux := http.NewServeMux()
	n := 0
	mux.HandleFunc("POST /orchard/v1/episodes", func(w http.ResponseWriter, r *http.Request) {
		if !p.isAdmin(w, r) {
			return
		}
		p.mu.Lock()
		n++
		id := fmt.Sprintf("ep-%d", n)
		p.mu.Unlock()
		base := "http://" + r.Host + "/e/" + id
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(envd.Episode{ID: id, Token: "tok-" + id, Env: map[string]string{
			"OPENAI_BASE_URL": base + "/v1", "OPENAI_API_KEY": "tok-" + id, "ANTHROPIC_BASE_URL": base}})
	})
	mux.HandleFunc("POST /orchard/v1/episodes/{id}/finish", func(w http.ResponseWriter, r *http.Request) {
		if !p.isAdmin(w, r) {
			return
		}
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"success"`) { // the probe's outcome; envd's deletes send "error"
			p.mu.Lock()
			p.finished = append(p.finished, r.PathValue("id"))
			p.mu.Unlock()
		}
		_, _ = w.Write([]byte(`{"id":"` + r.PathValue("id") + `"}`))
	})
	mux.HandleFunc("/e/{ep}/v1/", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-"+r.PathValue("ep") {
			http.Error(w, "wrong episode token", http.StatusUnauthorized)
			return
		}
		p.mu.Lock()
		p.calls = append(p.calls, r.PathValue("ep")+" "+r.URL.Path)
		p.mu.Unlock()
		_, _ = w.Write([]byte(`{"choices":[]}`))
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	return p
}

func (p *fakeProxy) isAdmin(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Authorization") != "Bearer "+p.admin {
		http.Error(w, "admin token required", http.StatusUnauthorized)
		return false
	}
	return true
}

// secureEnv is envd in its default configuration (token required, the
// default network mode) with episodes on a fake proxy.
type secureEnv struct {
	*env
	proxy *fakeProxy
	token string
}

func newSecureEnv(t testing.TB, b *Backend) *secureEnv {
	t.Helper()
	p := newFakeProxy(t)
	opts := envd.Options{Backend: b, BackendName: "local", Episodes: envd.NewEpisodeClient(p.URL, p.admin, nil)}
	m := envd.NewManager(opts)
	const token = "escape-envd-token"
	ts := httptest.NewServer(envd.NewServer(envd.ServerOptions{Manager: m, Token: token}))
	t.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = m.Start(ctx)
	})
	e := &env{b: b, m: m, url: ts.URL, c: client.New(client.Options{BaseURL: ts.URL, Token: token})}
	return &secureEnv{env: e, proxy: p, token: token}
}

// probe runs the probe inside sb and returns its lines.
func probe(t *testing.T, sb *client.Sandbox, args ...string) []string {
	t.Helper()
	res, err := sb.Exec(context.Background(), envd.ExecRequest{Cmd: append([]string{agentMount}, args...),
		Env: map[string]string{probeModeEnv: "1"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("probe: %+v, %v", res, err)
	}
	return strings.Fields(res.Stdout)
}

// TestEscape is the escape suite of the local backend in its default
// configuration: each case is something an agent inside a sandbox tries,
// and the exact refusal it gets.
func TestEscape(t *testing.T) {
	t.Parallel()
	e := newSecureEnv(t, newBackend(t))
	ctx := context.Background()
	sb := e.create(t, envd.Spec{Episode: &envd.EpisodeSpec{TaskID: "escape"}})
	if sb.Info.Network != envd.NetworkProxy {
		t.Fatalf("default network = %q, want proxy", sb.Info.Network)
	}
	proxyData := t.TempDir()
	if err := os.WriteFile(filepath.Join(proxyData, "episodes.log"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, sb, "ln -s /etc/passwd passwd-link; ln -s / root-link; echo mine > mine.txt")
	tests := []struct{ name, shell, want string }{
		{"uid", "id -u; id -g", "65534\n65534\n"},
		{"no_new_privs and no capabilities", "grep -E '^(NoNewPrivs|CapEff)' /proc/self/status", "CapEff:\t0000000000000000\nNoNewPrivs:\t1\n"},
		{"shadow", "cat /etc/shadow /etc/gshadow /etc/sudoers 2>/dev/null || echo denied", "denied\n"},
		{"root home", "ls /root 2>/dev/null || echo absent", "absent\n"},
		{"homes", "ls /home/* 2>/dev/null || echo absent", "absent\n"},
		{"system secrets", "ls /var/lib /srv /mnt /media /etc/machine-id /etc/ssl/private 2>/dev/null || echo absent", "absent\n"},
		{"ssh host keys", "ls /etc/ssh 2>/dev/null | grep ssh_host_ || echo none", "none\n"},
		{"state dir", "ls " + e.b.opts.StateDir + " 2>/dev/null || echo absent", "absent\n"},
		{"proxy data dir", "cat " + proxyData + "/episodes.log 2>/dev/null || echo absent", "absent\n"},
		{"write outside", "for p in /usr/x /etc/x /x /.orchard/x /var/x /bin/x; do touch $p 2>/dev/null && echo wrote $p; done; echo done", "done\n"},
		{"write work and tmp", "touch /work/ok /tmp/ok && echo ok", "ok\n"},
		{"host pids", "set -- /proc/[0-9]*; echo $#", "3\n"},
		{"ca bundle readable", "test -r /etc/ssl/certs && echo yes", "yes\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(t, sb, tt.shell); got.Stdout != tt.want {
				t.Errorf("%s: stdout = %q (stderr %q), want %q", tt.shell, got.Stdout, got.Stderr, tt.want)
			}
		})
	}
	t.Run("files API", func(t *testing.T) { checkFilesAPI(t, sb) })
	t.Run("host uid", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("envd is not root: the sandbox runs as envd's user")
		}
		e.b.mu.Lock()
		pid := e.b.boxes[sb.ID()].cmd.Process.Pid
		e.b.mu.Unlock()
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if !strings.Contains(string(st), "\nUid:\t65534\t65534\t65534\t65534\n") {
			t.Errorf("jail process on the host: %s, want uid 65534", st)
		}
	})
	_ = ctx
}

// checkFilesAPI: "..", absolute paths outside the work dir and symlinks
// made inside the sandbox pointing out are refused with 403 naming the
// rule, for reads and writes.
func checkFilesAPI(t *testing.T, sb *client.Sandbox) {
	ctx := context.Background()
	for _, tt := range []struct{ path, rule string }{
		{"/etc/shadow", "reaches only the work directory"},
		{"/etc/passwd", "reaches only the work directory"},
		{"../../../../etc/passwd", `no ".." out of the work directory`},
		{"passwd-link", "symlinks are not followed out"},
		{"root-link/etc/passwd", "symlinks are not followed out"},
	} {
		_, rerr := sb.ReadFile(ctx, tt.path)
		werr := sb.WriteFile(ctx, tt.path, []byte("pwned"), 0o644)
		for op, err := range map[string]error{"read": rerr, "write": werr} {
			if !isStatus(err, 403) || !strings.Contains(err.Error(), tt.rule) {
				t.Errorf("%s %s = %v, want 403 naming %q", op, tt.path, err, tt.rule)
			}
		}
	}
	if got, err := sb.ReadFile(ctx, "/work/mine.txt"); err != nil || string(got) != "mine\n" {
		t.Errorf("ReadFile(/work/mine.txt) = %q, %v", got, err)
	}
	if err := sb.PutTar(ctx, "/etc", nil); !isStatus(err, 403) {
		t.Errorf("PutTar(/etc) = %v, want 403", err)
	}
}

// TestEscapeNetwork: from inside a sandbox, in every network mode, envd's
// API, the proxy's admin and episode API, Redis, another sandbox and
// loopback servers on the host are unreachable or refuse, and no reward
// can be set; in proxy mode the sandbox's own model route works through
// its base URL and nothing else does.
func TestEscapeNetwork(t *testing.T) {
	t.Parallel()
	e := newSecureEnv(t, newBackend(t))
	rd := redistest.NewServer(t)
	other := e.create(t, envd.Spec{Episode: &envd.EpisodeSpec{TaskID: "victim"}})
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer host.Close()
	envdURL, proxyURL := e.url, e.proxy.URL
	victimEp := other.Info.EpisodeID
	for _, mode := range []string{envd.NetworkProxy, envd.NetworkNone, envd.NetworkHost} {
		t.Run(mode, func(t *testing.T) {
			sb := e.create(t, envd.Spec{Network: mode, Episode: &envd.EpisodeSpec{TaskID: "attacker"}})
			ep := sb.Info.EpisodeID
			got := probe(t, sb,
				"GET "+envdURL+"/envd/v1/sandboxes",
				"DELETE "+envdURL+"/envd/v1/sandboxes/"+other.ID(),
				"POST "+envdURL+"/envd/v1/sandboxes/"+other.ID()+"/exec",
				"POST "+proxyURL+"/orchard/v1/episodes/"+ep+"/finish",
				"POST "+proxyURL+"/orchard/v1/episodes/"+victimEp+"/finish",
				"POST "+proxyURL+"/e/"+victimEp+"/v1/chat/completions",
				"POST "+proxyURL+"/e/"+ep+"/v1/chat/completions",
				"TCP "+rd.Addr(),
				"GET "+host.URL)
			want := map[string]string{
				// envd refuses without its token; the proxy's admin routes
				// without the admin token; another episode's route without
				// its token; Redis and the host server answer: host mode
				// shares the host's loopback.
				envd.NetworkHost: "401 401 401 401 401 401 200 open 200",
				envd.NetworkNone: "err err err err err err err err err",
				// Loopback only; the proxy's port is the gate's bridge, which
				// passes the sandbox's own model route alone.
				envd.NetworkProxy: "err err err 403 403 403 200 err err",
			}[mode]
			if strings.Join(got, " ") != want {
				t.Errorf("probe results = %q, want %q", strings.Join(got, " "), want)
			}
		})
	}
	if _, err := other.Exec(context.Background(), envd.ExecRequest{Shell: "true"}); err != nil {
		t.Errorf("victim sandbox after the attacks: %v", err)
	}
	e.proxy.mu.Lock()
	defer e.proxy.mu.Unlock()
	if len(e.proxy.finished) != 0 {
		t.Errorf("episodes finished from inside sandboxes: %v", e.proxy.finished)
	}
	if len(e.proxy.calls) != 2 {
		t.Errorf("model calls recorded = %v, want the attacker's own in proxy and host mode", e.proxy.calls)
	}
}
