package proxy

import (
	"log"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/lineage"
)

// Sink receives finished call records. Record must not block on storage
// and must not drop the record; the proxy does not touch c after the call.
type Sink interface {
	Record(c *recorder.Call)
}

// SinkFunc adapts a function to [Sink].
type SinkFunc func(c *recorder.Call)

// Record calls f(c).
func (f SinkFunc) Record(c *recorder.Call) { f(c) }

// Options configure a [Handler]. Upstream is required; every other zero
// field takes the default given in its comment.
type Options struct {
	// Upstream is the default OpenAI-style base URL, e.g. http://127.0.0.1:8000/v1.
	// A request for /v1/X is sent to Upstream + "/X".
	Upstream *Upstream
	// Anthropic is the base URL for /v1/messages*; nil means Upstream.
	Anthropic *Upstream
	// Routes send requests for a model name to another upstream.
	Routes map[string]*Upstream

	// Sink receives the records; nil discards them.
	Sink Sink
	// Tokens verifies episode tokens presented as API keys; nil disables them.
	Tokens TokenVerifier
	// RequireToken makes inference routes accept only valid episode tokens.
	RequireToken bool

	// Episodes backs the episode API at /orchard/v1/episodes and token
	// revocation; nil disables both.
	Episodes EpisodeStore
	// Signer issues the tokens of episodes created through the API; it is
	// required when Episodes is set, and usually also serves as Tokens.
	Signer *Signer
	// AdminToken, when set, is required as a bearer token on /orchard/v1/*.
	AdminToken string
	// PublicURL is the base URL sandboxes reach the proxy at, used in the
	// env block of new episodes; "" means the Host the request came to.
	PublicURL string
	// TokenTTL is how long an episode token stays valid. Default 24h.
	TokenTTL time.Duration
	// Finishes, when set, carries finishes between the replicas sharing
	// Episodes: a token is refused on every replica once its episode
	// finished on one, even while the store cannot answer.
	Finishes FinishFeed

	// Registry, when set, gets the proxy's metrics and is served at /metrics.
	Registry *prometheus.Registry
	// LineageBytes bounds the memory, in bytes, of the episodes' drift-
	// detection state (least recently used go first): a call of an episode
	// that fell out is classified as if the episode began there. Each keeps
	// its threads' last token ids (4 bytes each: 120 KB for a 30,000-token
	// context), so this is the proxy's largest cache with token ids on.
	// Default lineage.DefaultMaxBytes (64 MiB).
	LineageBytes int64

	// IdleTimeout aborts an upstream exchange after this long without a byte
	// (before the response headers, or between body reads). Default 10m.
	IdleTimeout time.Duration
	// MaxBodyBytes caps a request body; larger ones get 413. Default 256 MiB.
	MaxBodyBytes int64
	// BodyReadTimeout bounds how long a recorded call's request body may
	// take to arrive (slow clients get 408). It is lifted once the body is
	// in, so it never limits the response stream. Default 5m.
	BodyReadTimeout time.Duration
	// Transport carries upstream requests; nil means a tuned http.Transport.
	Transport http.RoundTripper
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
	// Workers assemble records off the request path. Default 2.
	Workers int
	// ProbeTimeout bounds each GET {base}/models that learns the kind of a
	// [KindAuto] upstream; calls made before a kind is known wait for it at
	// most this long. Default 3s.
	ProbeTimeout time.Duration
}

// Upstream is one inference server the proxy forwards to.
type Upstream struct {
	// BaseURL is the server's API base including its version path,
	// e.g. http://127.0.0.1:8000/v1.
	BaseURL *url.URL
	// Key, when set, replaces the client's credential upstream. It never
	// leaves the proxy otherwise.
	Key string
	// Kind names the server type for token injection; [KindAuto] learns it
	// from the server. "" behaves like [KindOpenAI].
	Kind UpstreamKind
}

// String returns the base URL without credentials.
func (u *Upstream) String() string {
	c := *u.BaseURL
	c.User = nil
	return c.String()
}

// Handler is the recording proxy. It is an http.Handler; call Close after
// the HTTP server has shut down so that records still being assembled reach
// the sink. A Handler is safe for concurrent use.
type Handler struct {
	opts   Options
	log    *slog.Logger
	rp     *httputil.ReverseProxy
	mux    chi.Router
	done   chan *exchange
	wg     sync.WaitGroup
	closed chan struct{}
	eps    *episodeAPI // nil without Options.Episodes
	lin    *lineage.Tracker
	order  *arrivals
	met    *metrics // nil without Options.Registry
	kinds  *detector
}

// New returns a Handler with its record workers running. It panics if
// opts.Upstream is nil, a programming error.
func New(opts Options) *Handler {
	if opts.Upstream == nil || opts.Upstream.BaseURL == nil {
		panic("proxy: Options.Upstream is required")
	}
	if opts.Anthropic == nil {
		opts.Anthropic = opts.Upstream
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 10 * time.Minute
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 256 << 20
	}
	if opts.BodyReadTimeout <= 0 {
		opts.BodyReadTimeout = 5 * time.Minute
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = 3 * time.Second
	}
	if opts.Transport == nil {
		opts.Transport = newTransport()
	}
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = 24 * time.Hour
	}
	if opts.Sink == nil {
		opts.Sink = SinkFunc(func(*recorder.Call) {})
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	h := &Handler{
		opts: opts,
		log:  lg,
		// A small backlog: past it, the request's own goroutine assembles
		// its record, which bounds the memory held by finished calls.
		done:   make(chan *exchange, 64),
		closed: make(chan struct{}),
	}
	h.rp = &httputil.ReverseProxy{
		Rewrite:        h.rewrite,
		Transport:      opts.Transport,
		FlushInterval:  -1,
		ModifyResponse: h.modifyResponse,
		ErrorHandler:   h.upstreamError,
		BufferPool:     bufferPool{},
		ErrorLog:       log.New(slogWriter{lg}, "", 0),
	}
	if opts.Episodes != nil {
		if opts.Signer == nil {
			panic("proxy: Options.Signer is required with Options.Episodes")
		}
		h.eps = &episodeAPI{store: opts.Episodes, signer: opts.Signer, adminToken: opts.AdminToken,
			publicURL: opts.PublicURL, tokenTTL: opts.TokenTTL, finished: newFinishedCache(1 << 16),
			running: make(map[string]time.Time)}
		h.eps.startFeed(opts.Finishes, lg)
	}
	if opts.Registry != nil {
		h.met = newMetrics(opts.Registry)
	}
	h.kinds = newDetector(opts, lg, h.met)
	if opts.LineageBytes <= 0 {
		opts.LineageBytes = lineage.DefaultMaxBytes
	}
	h.lin = lineage.NewTracker(lineage.Options{MaxBytes: opts.LineageBytes})
	h.order = newArrivals()
	h.mux = h.routes()
	for range opts.Workers {
		h.wg.Add(1)
		go h.assembleLoop()
	}
	return h
}

// ServeHTTP routes and serves one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// Close waits for the records of finished exchanges to be handed to the
// sink. Call it once, after the server stopped sending requests.
func (h *Handler) Close() error {
	close(h.done)
	h.wg.Wait()
	h.kinds.close()
	h.eps.stopFeed()
	return nil
}

func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil, // never route model traffic through an environment proxy
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
		// Compression is the client's business: the proxy forwards the
		// client's Accept-Encoding and never decompresses what it relays.
		DisableCompression: true,
		// SSE events are a few hundred bytes; the default 4 KiB buffers
		// keep 256 streams cheap.
	}
}

// slogWriter sends the ReverseProxy's internal log lines to slog.
type slogWriter struct{ l *slog.Logger }

func (s slogWriter) Write(p []byte) (int, error) {
	s.l.Warn("reverse proxy", "detail", strings.TrimSpace(string(p)))
	return len(p), nil
}

// bufferPool recycles the ReverseProxy's copy buffers.
type bufferPool struct{}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *copyBufs.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBufs.Put(&b) }
