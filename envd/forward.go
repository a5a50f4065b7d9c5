package envd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
)

// maxExecBody caps exec request bodies (stdin travels inside them).
const maxExecBody = 64 << 20

// newForwarder returns the reverse proxy that carries requests to one
// sandbox's agent. Requests reaching it already have their agent path.
func newForwarder(inst *Instance, logger *slog.Logger) *httputil.ReverseProxy {
	base, err := url.Parse(inst.BaseURL)
	if err != nil {
		// Backends build BaseURL themselves; a bad one is a programming error.
		panic(fmt.Sprintf("envd: backend returned bad agent URL %q: %v", inst.BaseURL, err))
	}
	token := inst.Token
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = base.Scheme, base.Host, base.Host
			pr.Out.Header.Del("Authorization")
			if token != "" {
				pr.Out.Header.Set("Authorization", "Bearer "+token)
			}
		},
		Transport:     inst.Transport,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client left; nobody reads an answer
			}
			WriteError(w, fmt.Errorf("%w: sandbox agent: %w", ErrUpstream, err))
		},
	}
}

// begin marks a request in flight on sb; the returned func ends it. A
// sandbox with requests in flight is never idle.
func (m *Manager) begin(sb *sandbox) func() {
	sb.mu.Lock()
	sb.active++
	sb.lastUsed = m.opts.Now()
	sb.mu.Unlock()
	return func() {
		sb.mu.Lock()
		sb.active--
		sb.lastUsed = m.opts.Now()
		sb.mu.Unlock()
	}
}

// Forward sends r to sandbox id's agent at /agent/v1/ + rest and copies
// the answer to w, streaming. Exec requests get the sandbox's env (spec
// env and episode credentials) under their own.
func (m *Manager) Forward(w http.ResponseWriter, r *http.Request, id, rest string) {
	sb, err := m.lookup(id)
	if err != nil {
		WriteError(w, err)
		return
	}
	defer m.begin(sb)()
	out := r.Clone(r.Context())
	out.URL.Path, out.URL.RawPath = "/agent/v1/"+rest, ""
	if rest == "exec" && r.Method == http.MethodPost {
		body, err := sb.execBody(w, r)
		if err != nil {
			WriteError(w, err)
			return
		}
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		out.Header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	sb.forward.ServeHTTP(w, out)
}

// execBody reads and validates an exec request and lays its env over the
// sandbox's.
func (sb *sandbox) execBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxExecBody))
	dec.DisallowUnknownFields()
	var req ExecRequest
	if err := dec.Decode(&req); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return nil, Errorf(ErrBadRequest, "exec body larger than %d bytes", mbe.Limit)
		}
		return nil, Errorf(ErrBadRequest, "decode exec request: %v", err)
	}
	env := maps.Clone(sb.env)
	maps.Copy(env, req.Env)
	req.Env = env
	return json.Marshal(req)
}
