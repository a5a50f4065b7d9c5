package episodes

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/orchard-rl/orchard/recorder"
)

// Prefix starts every path the [Handler] serves.
const Prefix = "/orchard/v1"

// Store is what the episode API needs from the recorder's store.
type Store interface {
	PutEpisode(ctx context.Context, ep *recorder.Episode) error
	AppendEvent(ctx context.Context, ev *recorder.Event) (int64, error)
	ListEpisodes(ctx context.Context, f recorder.Filter) ([]recorder.EpisodeSummary, string, error)
	Episode(ctx context.Context, id string) (*recorder.EpisodeSummary, error)
	Calls(ctx context.Context, episodeID string) ([]*recorder.Call, error)
	Events(ctx context.Context, episodeID string) ([]*recorder.Event, error)
}

// Options configure a [Handler]. Store and Signer are required; every
// other zero field takes the default given in its comment.
type Options struct {
	// Store holds the episodes, and the calls the proxy records into them.
	Store Store
	// Signer issues the tokens of new episodes and verifies presented ones.
	Signer *Signer
	// AdminToken, when set, is required as a bearer token on every route.
	AdminToken string
	// PublicURL is the base URL sandboxes reach the proxy at, used in the
	// env block of new episodes; "" means the Host the request came to.
	PublicURL string
	// TokenTTL is how long an episode token stays valid. Default 24h.
	TokenTTL time.Duration
	// Finishes, when set, carries finishes between the replicas sharing
	// Store: a token is refused on every replica once its episode
	// finished on one, even while the store cannot answer.
	Finishes FinishFeed
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
}

// Handler serves the episode API and verifies episode tokens, between
// [Handler.Start] and [Handler.Close]. A Handler is safe for concurrent use.
type Handler struct {
	opts     Options
	log      *slog.Logger
	mux      chi.Router
	finished *finishedCache
	onFinish atomic.Pointer[func(episode string)] // see OnFinish
	createMu sync.Mutex                           // serialises create's check and put on a store that is no recorder.Creator

	stopSub context.CancelFunc // nil until Start, and without Options.Finishes
	subDone chan struct{}
	life    sync.Mutex   // serialises Start and Close
	state   atomic.Int32 // notStarted, started or closed

	mu      sync.Mutex           // guards following
	running map[string]time.Time // episodes seen running, and when
}

// OnFinish makes h call f with the id of every episode it learns has
// finished: through its finish endpoint, from the finish feed of the other
// replicas, or from the store when a token of a finished episode is
// checked. An episode may be reported more than once; f must not block.
func (h *Handler) OnFinish(f func(episode string)) { h.onFinish.Store(&f) }

// noteFinished records that episode finished and reports it to OnFinish's f.
func (h *Handler) noteFinished(episode string) {
	h.finished.add(episode)
	if f := h.onFinish.Load(); f != nil {
		(*f)(episode)
	}
}

// The states of a Handler.
const (
	notStarted = iota
	started
	closed
)

// errNotRunning is Verify's answer outside Start and Close: it fails closed.
var errNotRunning = errors.New("episode API is not running: its Handler was not started, or is closed")

// New returns a Handler that starts nothing: [Handler.Start] subscribes it
// to opts.Finishes. It panics if opts.Store or opts.Signer is nil, a
// programming error.
func New(opts Options) *Handler {
	if opts.Store == nil || opts.Signer == nil {
		panic("episodes: Options.Store and Options.Signer are required")
	}
	opts.defaults()
	h := &Handler{opts: opts, log: opts.Logger, finished: newFinishedCache(1 << 16), running: make(map[string]time.Time)}
	h.mux = h.routes()
	return h
}

// Start subscribes to Options.Finishes, when set, and returns once the
// subscription runs; it ends when ctx is done or in [Handler.Close]. Until
// Start, ServeHTTP answers 503 and Verify refuses every credential. Start
// may be called once, before Close.
func (h *Handler) Start(ctx context.Context) error {
	h.life.Lock()
	defer h.life.Unlock()
	switch h.state.Load() {
	case started:
		return errors.New("episodes: Start called twice")
	case closed:
		return errors.New("episodes: Start after Close")
	}
	h.startFeed(ctx)
	h.state.Store(started)
	return nil
}

// defaults fills the zero fields of o.
func (o *Options) defaults() {
	if o.TokenTTL <= 0 {
		o.TokenTTL = 24 * time.Hour
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ServeHTTP serves one request for a path under [Prefix]. Before
// [Handler.Start], or after [Handler.Close], it answers 503.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.state.Load() != started {
		writeError(w, newError(http.StatusServiceUnavailable, "unavailable", errNotRunning.Error()))
		return
	}
	h.mux.ServeHTTP(w, r)
}

// Beside returns a handler that serves the paths under [Prefix] with h and
// every other with next: cmd/orchard puts it beside the proxy this way.
func (h *Handler) Beside(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == Prefix || strings.HasPrefix(p, Prefix+"/") {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Close ends the subscription to Options.Finishes and waits for it. Call
// it once, after the server stopped sending requests.
func (h *Handler) Close() error {
	h.life.Lock()
	defer h.life.Unlock()
	if h.state.Swap(closed) == closed {
		return errors.New("episodes: Close called twice")
	}
	h.stopFeed()
	return nil
}

func (h *Handler) routes() chi.Router {
	r := chi.NewRouter()
	r.Route(Prefix, func(r chi.Router) {
		r.Use(h.requireAdmin)
		r.Post("/episodes", h.create)
		r.Get("/episodes", h.list)
		r.Get("/episodes/{id}", h.get)
		r.Post("/episodes/{id}/finish", h.finish)
		r.Post("/episodes/{id}/events", h.appendEvent)
		r.Get("/episodes/{id}/events", h.events)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, newError(http.StatusNotFound, "not_found", "no route for "+r.Method+" "+r.URL.Path+"; the episode API serves "+Prefix+"/episodes"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, newError(http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path))
	})
	return r
}

func (h *Handler) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.opts.AdminToken != "" {
			tok := credential(r.Header)
			if subtle.ConstantTimeCompare([]byte(tok), []byte(h.opts.AdminToken)) != 1 {
				writeError(w, unauthorized("the episode API needs the admin token: send Authorization: Bearer <admin token>"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// credential returns the client's API key: a bearer token or x-api-key.
func credential(h http.Header) string {
	if v := h.Get("Authorization"); v != "" {
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			return strings.TrimSpace(v[7:])
		}
		return ""
	}
	return h.Get("X-Api-Key")
}
