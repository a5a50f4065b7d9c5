package orchardenv

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// Sandboxes is the part of [envd.Manager] the API calls.
type Sandboxes interface {
	Create(ctx context.Context, spec envd.Spec) (envd.Sandbox, error)
	Get(id string) (envd.Sandbox, error)
	Delete(ctx context.Context, id string, o *envd.Outcome) (envd.DeleteResult, error)
	Forward(w http.ResponseWriter, r *http.Request, id, rest string)
}

// Backend names which envd backend runs the sandboxes; it decides what
// an Orchard image name means.
type Backend string

// The backends.
const (
	BackendLocal      Backend = "local"      // image "default" or a root filesystem directory
	BackendKubernetes Backend = "kubernetes" // image is the pod's container image
)

// Options configures [New].
type Options struct {
	Manager Sandboxes // required
	Backend Backend   // default BackendLocal
	// APIKeys, when not empty, are the keys accepted in X-API-Key (or as
	// "Authorization: Bearer <key>"); empty means no authentication.
	APIKeys []string
	// ExecTimeout applies to commands that give no timeout_seconds;
	// default 300 s (Orchard's default_timeout_seconds).
	ExecTimeout time.Duration
	// MaxJobs caps the finished jobs kept for polling; the oldest are
	// forgotten first. Default 4096.
	MaxJobs int
	Logger  *slog.Logger // nil discards
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Handler serves the Orchard Env API. Create it with [New]; it is safe
// for concurrent use.
type Handler struct {
	opts   Options
	mux    *http.ServeMux
	ctx    context.Context // canceled by Close; ends running jobs
	cancel context.CancelFunc
	wg     sync.WaitGroup // running jobs

	mu        sync.Mutex // guards following
	sandboxes map[string]*sandbox
	jobs      map[string]*job
	finished  []string // ids of finished jobs, oldest first
}

// New returns the API handler of opts.Manager; call Close when done.
func New(opts Options) *Handler {
	if opts.Manager == nil {
		panic("orchardenv.New: nil Manager")
	}
	opts.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	h := &Handler{opts: opts, mux: http.NewServeMux(), ctx: ctx, cancel: cancel,
		sandboxes: map[string]*sandbox{}, jobs: map[string]*job{}}
	h.routes()
	return h
}

// defaults fills the zero fields of o.
func (o *Options) defaults() {
	if o.Backend == "" {
		o.Backend = BackendLocal
	}
	if o.ExecTimeout <= 0 {
		o.ExecTimeout = 300 * time.Second
	}
	if o.MaxJobs <= 0 {
		o.MaxJobs = 4096
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

func (h *Handler) routes() {
	h.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"service": "orchard-envd", "version": "0.1.0", "status": "running"})
	})
	h.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
	})
	h.mux.HandleFunc("POST /sandboxes", h.create)
	h.mux.HandleFunc("GET /sandboxes/{id}", h.get)
	h.mux.HandleFunc("GET /sandboxes/{id}/wait", h.waitSandbox)
	h.mux.HandleFunc("DELETE /sandboxes/{id}", h.delete)
	h.mux.HandleFunc("POST /sandboxes/{id}/heartbeat", h.heartbeat)
	h.mux.HandleFunc("POST /sandboxes/{id}/exec", h.exec)
	h.mux.HandleFunc("POST /sandboxes/{id}/apply_patch", h.applyPatch)
	h.mux.HandleFunc("POST /sandboxes/{id}/files", h.upload)
	h.mux.HandleFunc("GET /sandboxes/{id}/files", h.download)
	h.mux.HandleFunc("GET /sandboxes/{id}/files/list", h.list)
	h.mux.HandleFunc("GET /jobs/{id}", h.getJob)
	h.mux.HandleFunc("GET /jobs/{id}/wait", h.waitJob)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, envd.Errorf(envd.ErrNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
}

// Close ends the jobs still running (their commands are killed) and
// waits for them.
func (h *Handler) Close() error {
	h.cancel()
	h.wg.Wait()
	return nil
}

// ServeHTTP checks the API key (except on / and /health, as Orchard
// does) and dispatches.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(h.opts.APIKeys) > 0 && r.URL.Path != "/" && r.URL.Path != "/health" {
		if err := h.authorize(r); err != nil {
			writeError(w, err)
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// Auth outcomes: Orchard answers 401 without a key and 403 with a wrong one.
var errForbidden = errors.New("forbidden")

func (h *Handler) authorize(r *http.Request) error {
	key := r.Header.Get("X-API-Key")
	if key == "" {
		key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if key == "" {
		return envd.Errorf(envd.ErrUnauthorized, "missing API key: send the X-API-Key header")
	}
	for _, k := range h.opts.APIKeys {
		if subtle.ConstantTimeCompare([]byte(key), []byte(k)) == 1 {
			return nil
		}
	}
	return fmt.Errorf("%w: invalid API key", errForbidden)
}

// notFound is a 404 whose message is Orchard's own ("Sandbox X not found").
func notFound(format string, args ...any) error {
	return &envd.Error{Status: http.StatusNotFound, Type: "not_found", Message: fmt.Sprintf(format, args...)}
}

// writeError writes err with its status as {"detail": msg} (the FastAPI
// shape Orchard's clients see) plus envd's {"error": {...}}.
func writeError(w http.ResponseWriter, err error) {
	status, typ := envd.StatusFor(err)
	switch {
	case errors.Is(err, errForbidden):
		status, typ = http.StatusForbidden, "forbidden"
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, map[string]any{"detail": err.Error(), "error": map[string]string{"type": typ, "message": err.Error()}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads a JSON object body (at most maxBody) into v; a type error
// names the field.
func decode(w http.ResponseWriter, r *http.Request, maxBody int64, v any) error {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(v)
	var te *json.UnmarshalTypeError
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF):
		return envd.Errorf(envd.ErrBadRequest, "empty body: send a JSON object")
	case errors.As(err, &mbe):
		return envd.Errorf(envd.ErrBadRequest, "body larger than %d bytes", mbe.Limit)
	case errors.As(err, &te) && te.Field != "":
		return envd.Errorf(envd.ErrBadRequest, "field %q: want %s, got a JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	return envd.Errorf(envd.ErrBadRequest, "body is not a JSON object: %v", err)
}

// jsonKind names a Go kind as JSON does.
func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"), strings.HasPrefix(k, "float"):
		return "a number"
	case k == "bool":
		return "true or false"
	case k == "string":
		return "a string"
	case k == "map", k == "struct":
		return "an object"
	case k == "slice":
		return "a list"
	}
	return k
}
