package agent

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// Options configures a [Server]. Zero fields take the documented defaults.
type Options struct {
	// Workdir is the default cwd and the base of relative paths; default
	// the process's working directory.
	Workdir string
	// BaseEnv is the environment every command starts from (KEY=VALUE);
	// request env is laid over it. Default: a minimal PATH and HOME.
	BaseEnv []string
	// Token, when set, is required as "Authorization: Bearer <Token>".
	Token string
	// DefaultTimeout applies to execs that give none; default 10 minutes.
	DefaultTimeout time.Duration
	// MaxOutput caps the stored stdout+stderr bytes of one exec; default
	// 16 MiB. Output past it is read and dropped, and the result says so.
	MaxOutput int64
	// MaxBody caps request bodies of exec calls; default 64 MiB.
	MaxBody int64
	// WaitDelay is how long an exec waits, after its process exits, for
	// background children still holding its output pipes; default 500 ms.
	WaitDelay time.Duration
	// Keepalive is the interval of keepalive events on idle streams;
	// default 15 s.
	Keepalive time.Duration
	// Retain is how many finished execs stay available for reattach;
	// default 256.
	Retain int
	// Logger receives request errors; nil discards.
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.Workdir == "" {
		o.Workdir, _ = os.Getwd()
	}
	if o.BaseEnv == nil {
		o.BaseEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + o.Workdir}
	}
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = 10 * time.Minute
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = 16 << 20
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 64 << 20
	}
	if o.WaitDelay <= 0 {
		o.WaitDelay = 500 * time.Millisecond
	}
	if o.Keepalive <= 0 {
		o.Keepalive = 15 * time.Second
	}
	if o.Retain <= 0 {
		o.Retain = 256
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Server is the agent's HTTP handler. It is safe for concurrent use.
// Close kills every running exec and waits for them.
type Server struct {
	opts   Options
	mux    *http.ServeMux
	ctx    context.Context // canceled by Close; stops running execs
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex // guards following
	execs    map[string]*execution
	finished []string // ids of finished execs, oldest first
}

// New returns a Server; call Close when done with it.
func New(opts Options) *Server {
	opts.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{opts: opts, mux: http.NewServeMux(), ctx: ctx, cancel: cancel, execs: map[string]*execution{}}
	s.mux.HandleFunc("GET /agent/v1/health", s.health)
	s.mux.HandleFunc("POST /agent/v1/exec", s.handleExec)
	s.mux.HandleFunc("GET /agent/v1/exec/{eid}", s.handleExecGet)
	s.mux.HandleFunc("GET /agent/v1/exec/{eid}/events", s.handleExecEvents)
	s.mux.HandleFunc("POST /agent/v1/exec/{eid}/kill", s.handleExecKill)
	s.mux.HandleFunc("PUT /agent/v1/files", s.handlePutFile)
	s.mux.HandleFunc("GET /agent/v1/files", s.handleGetFile)
	s.mux.HandleFunc("PUT /agent/v1/tar", s.handlePutTar)
	s.mux.HandleFunc("GET /agent/v1/tar", s.handleGetTar)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		envd.WriteError(w, envd.Errorf(envd.ErrNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	return s
}

// Close kills every running exec and waits until all have been reaped.
func (s *Server) Close() error {
	s.cancel()
	s.wg.Wait()
	return nil
}

// ServeHTTP checks the bearer token (except on the health route, which
// kubelet readiness probes call) and dispatches.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.Token != "" && r.URL.Path != "/agent/v1/health" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) != 1 {
			envd.WriteError(w, envd.Errorf(envd.ErrUnauthorized, "missing or wrong agent token"))
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

func (s *Server) newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "x-" + hex.EncodeToString(b[:])
}

func (s *Server) register(x *execution) {
	s.mu.Lock()
	s.execs[x.id] = x
	s.mu.Unlock()
}

// retire marks x finished and forgets the oldest finished execs beyond
// the retention count.
func (s *Server) retire(x *execution) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished = append(s.finished, x.id)
	for len(s.finished) > s.opts.Retain {
		delete(s.execs, s.finished[0])
		s.finished = s.finished[1:]
	}
}

func (s *Server) lookup(id string) (*execution, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.execs[id]
	if !ok {
		return nil, envd.Errorf(envd.ErrNotFound, "no exec %q (finished execs are kept for the last %d)", id, s.opts.Retain)
	}
	return x, nil
}

// decodeJSON reads a bounded JSON body into v, rejecting unknown fields.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return envd.Errorf(envd.ErrBadRequest, "request body larger than %d bytes", mbe.Limit)
		}
		return envd.Errorf(envd.ErrBadRequest, "decode JSON body: %v", err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
