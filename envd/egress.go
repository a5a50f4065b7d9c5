package envd

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// DefaultMaxSandboxes is the cap on live sandboxes of a [Manager] whose
// Options give none: above the 1000 sandboxes one envd was measured to
// hold at once on a 2-core machine (docs/envd.md), below what exhausts
// its pids and memory.
const DefaultMaxSandboxes = 1024

// Egress is how a sandbox in network mode [NetworkProxy] reaches the
// model. The backend serves Handler on a socket only that sandbox can
// dial and, when it can, listens on 127.0.0.1:Port inside the sandbox and
// forwards each connection there ([Instance].EgressBridged).
type Egress struct {
	// Handler is envd's gate: it passes the sandbox's own episode's model
	// routes (/e/{episode}/v1/...) to the proxy and refuses everything
	// else, the proxy's admin and episode API included.
	Handler http.Handler
	// Port is the loopback port inside the sandbox: the proxy URL's own
	// port (8080 when that is below 1024), so a base URL like
	// http://127.0.0.1:8080/e/ID/v1 stays as it is.
	Port int
}

// reservedTop are the top-level directories a work dir may not be in:
// the jail builds them (system directories, /proc, /dev, /run) or holds
// the agent (/.orchard) there.
var reservedTop = map[string]bool{
	"bin": true, "boot": true, "dev": true, "etc": true, "lib": true, "lib32": true, "lib64": true,
	"libx32": true, "proc": true, "run": true, "sbin": true, "sys": true, "usr": true,
	".orchard": true,
}

// checkWorkdir refuses work dirs that would break the jail, naming the
// rule.
func checkWorkdir(dir string) error {
	if !path.IsAbs(dir) || path.Clean(dir) == "/" {
		return Errorf(ErrBadRequest, "workdir %q: want an absolute path other than /", dir)
	}
	top, _, _ := strings.Cut(strings.TrimPrefix(path.Clean(dir), "/"), "/")
	if reservedTop[top] {
		return Errorf(ErrBadRequest, "workdir %q: /%s is a system directory of the sandbox (rule: a work dir is not under /bin, /boot, /dev, /etc, /lib*, /proc, /run, /sbin, /sys, /usr or /.orchard)", dir, top)
	}
	return nil
}

// EgressBridger is the optional ability of a [Backend] to bridge
// [Spec.Egress] into its sandboxes (the local backend; on Kubernetes a
// NetworkPolicy lets pods reach the proxy instead).
type EgressBridger interface {
	// BridgesEgress reports whether Create serves Spec.Egress.
	BridgesEgress() bool
}

// egress prepares spec.Egress for network mode proxy and returns the
// proxy base URL the episode's env uses ("" when there is nothing to
// bridge: another mode, no episode, or a backend that does not bridge).
func (m *Manager) egress(spec *Spec, ep *Episode) (string, error) {
	br, ok := m.opts.Backend.(EgressBridger)
	if spec.Network != NetworkProxy || ep == nil || !ok || !br.BridgesEgress() {
		return "", nil
	}
	base, ok := strings.CutSuffix(ep.Env["OPENAI_BASE_URL"], "/e/"+ep.ID+"/v1")
	u, err := url.Parse(base)
	if !ok || err != nil || u.Host == "" {
		return "", Errorf(ErrUpstream, "network proxy: the proxy's OPENAI_BASE_URL %q is not BASE/e/%s/v1", ep.Env["OPENAI_BASE_URL"], ep.ID)
	}
	// Without capabilities the sandbox's agent cannot bind a port below
	// 1024 (a proxy on :80 or :443); 8080 then, and the env is rewritten.
	port, _ := strconv.Atoi(u.Port())
	if port < 1024 {
		port = 8080
	}
	spec.Egress = &Egress{Handler: newGate(u, ep.ID, m.opts.Logger), Port: port}
	return base, nil
}

// rewriteBase points every env value that starts with base at to.
func rewriteBase(env map[string]string, base, to string) {
	for k, v := range env {
		if rest, ok := strings.CutPrefix(v, base); ok {
			env[k] = to + rest
		}
	}
}

// newGate returns the handler that carries one sandbox's model calls to
// the proxy at base: only paths under /e/{episode}/v1/, in clean form,
// pass. The episode token the harness sends is checked by the proxy.
func newGate(base *url.URL, episode string, logger *slog.Logger) http.Handler {
	prefix := "/e/" + episode + "/v1/"
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(base)
			for k := range pr.Out.Header {
				if strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Orchard-") {
					pr.Out.Header.Del(k)
				}
			}
		},
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			WriteError(w, fmt.Errorf("%w: proxy: %w", ErrUpstream, err))
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if !strings.HasPrefix(p, prefix) || (r.URL.RawPath != "" && r.URL.RawPath != p) ||
			strings.Contains(p, "/../") || strings.Contains(p, "/./") || strings.Contains(p, "//") {
			WriteError(w, &Error{Status: http.StatusForbidden, Type: "forbidden",
				Message: fmt.Sprintf("%s %s: a sandbox reaches only its own episode's model routes (%s...)", r.Method, p, prefix)})
			return
		}
		rp.ServeHTTP(w, r)
	})
}
