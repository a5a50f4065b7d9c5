package envd

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
)

// ServerOptions configures [NewServer].
type ServerOptions struct {
	Manager *Manager // required
	// Token, when set, is required from clients as
	// "Authorization: Bearer <Token>".
	Token  string
	Logger *slog.Logger // nil discards
}

// Server is envd's HTTP API (documented in docs/envd.md).
type Server struct {
	opts ServerOptions
	mux  *http.ServeMux
}

// NewServer returns the API handler for opts.Manager.
func NewServer(opts ServerOptions) *Server {
	if opts.Manager == nil {
		panic("envd.NewServer: nil Manager")
	}
	opts.defaults()
	s := &Server{opts: opts, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /envd/v1/health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	})
	s.mux.HandleFunc("POST /envd/v1/sandboxes", s.create)
	s.mux.HandleFunc("GET /envd/v1/sandboxes", s.list)
	s.mux.HandleFunc("GET /envd/v1/sandboxes/{id}", s.get)
	s.mux.HandleFunc("DELETE /envd/v1/sandboxes/{id}", s.delete)
	s.mux.HandleFunc("/envd/v1/sandboxes/{id}/{rest...}", s.forward)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, Errorf(ErrNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	return s
}

// defaults fills the zero fields of o.
func (o *ServerOptions) defaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ServeHTTP checks the bearer token and dispatches.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.Token != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) != 1 {
			WriteError(w, Errorf(ErrUnauthorized, "missing or wrong envd token (send Authorization: Bearer <token>)"))
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var spec Spec
	if err := decodeStrict(w, r, &spec, false); err != nil {
		WriteError(w, err)
		return
	}
	sb, err := s.opts.Manager.Create(r.Context(), spec)
	if err != nil {
		s.logFailure(r, err)
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, sb)
}

func (s *Server) list(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": s.opts.Manager.List()})
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	sb, err := s.opts.Manager.Get(r.PathValue("id"))
	if err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

// delete kills the sandbox; an optional {"reward","status","info"} body
// finishes its episode.
func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	var o *Outcome
	if r.ContentLength != 0 {
		var v Outcome
		if err := decodeStrict(w, r, &v, true); err != nil {
			WriteError(w, err)
			return
		}
		if v.Status != "" {
			switch v.Status {
			case "success", "failure", "error", "timeout":
			default:
				WriteError(w, Errorf(ErrBadRequest, "status %q: want success, failure, error or timeout", v.Status))
				return
			}
			o = &v
		}
	}
	res, err := s.opts.Manager.Delete(r.Context(), r.PathValue("id"), o)
	if err != nil {
		s.logFailure(r, err)
		WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) forward(w http.ResponseWriter, r *http.Request) {
	s.opts.Manager.Forward(w, r, r.PathValue("id"), r.PathValue("rest"))
}

// logFailure logs server-side failures (5xx) at the boundary.
func (s *Server) logFailure(r *http.Request, err error) {
	if status, _ := StatusFor(err); status >= 500 {
		s.opts.Logger.Warn("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
}

// decodeStrict reads a JSON body (at most 1 MiB) into v, rejecting
// unknown fields; an empty body is allowed when emptyOK.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF) && emptyOK:
		return nil
	case errors.Is(err, io.EOF):
		return Errorf(ErrBadRequest, "empty body: send a JSON object")
	}
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return Errorf(ErrBadRequest, "body larger than %d bytes", mbe.Limit)
	}
	return Errorf(ErrBadRequest, "decode JSON body: %v", err)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
