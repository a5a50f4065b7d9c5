package proxy

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
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
	// A request for /v1/X is sent to Upstream + "/X". New logs a warning
	// for a base URL without a version path or with an API path on it.
	Upstream *Upstream
	// Anthropic is the base URL for /v1/messages*; nil means Upstream.
	Anthropic *Upstream
	// Routes send requests for a model name to another upstream.
	Routes map[string]*Upstream

	// Sink receives the records; nil discards them.
	Sink Sink
	// Verifier checks the API keys clients present for episode tokens;
	// nil treats every key as the harness's own.
	Verifier Verifier
	// RequireToken makes inference routes accept only valid episode tokens;
	// it needs a Verifier.
	RequireToken bool

	// Registry, when set, gets the proxy's metrics and is served at /metrics.
	Registry *prometheus.Registry
	// LiveLineage classifies each call against the earlier calls of its
	// episode (extend, retry, fork, ...) as it is recorded, for the
	// orchard_proxy_lineage_total metric and the record's lineage field.
	// Off by default: whoever reads a stored episode (the episode API,
	// exports, reconstruct) classifies it again from the stored calls and
	// never reads the recorded field, so the metric is all it adds, for
	// 2-5% of the CPU per call and up to LineageBytes of memory (10-20% of
	// the peak RSS under load, where episodes are not finished).
	LiveLineage bool
	// LineageBytes bounds the memory, in bytes, of the episodes' drift-
	// detection state with LiveLineage (least recently used go first): a
	// call of an episode that fell out is classified as if the episode
	// began there. Each keeps its threads' last token ids (4 bytes each:
	// 120 KB for a 30,000-token context), so this is the proxy's largest
	// cache with token ids on. A finished episode's state goes sooner,
	// through [Handler.Forget]. Default lineage.DefaultMaxBytes (64 MiB).
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

// Handler is the recording proxy. It is an http.Handler that serves only
// after [Handler.Start]; call [Handler.Close] after the HTTP server has shut
// down so that records still being assembled reach the sink. A Handler is
// safe for concurrent use.
type Handler struct {
	opts  Options
	log   *slog.Logger
	rp    *httputil.ReverseProxy
	mux   chi.Router
	done  chan *exchange
	wg    sync.WaitGroup
	lin   *lineage.Tracker // nil without Options.LiveLineage
	order *arrivals
	met   *metrics // nil without Options.Registry

	kinds *detector

	warned404 atomic.Bool // an upstream 404 for a model call was logged

	mu      sync.Mutex // guards following
	started bool
	closed  bool
	running atomic.Bool // Start ran and Close has not: ServeHTTP serves
}

// New returns a Handler that starts nothing: [Handler.Start] starts its
// record workers and upstream-kind probes. It panics if
// opts.Upstream is nil, or RequireToken is set without a Verifier: both
// programming errors.
func New(opts Options) *Handler {
	if opts.Upstream == nil || opts.Upstream.BaseURL == nil {
		panic("proxy: Options.Upstream is required")
	}
	if opts.RequireToken && opts.Verifier == nil {
		panic("proxy: Options.RequireToken needs a Verifier")
	}
	opts.defaults()
	lg := opts.Logger
	h := &Handler{
		opts: opts,
		log:  lg,
		// A small backlog: past it, the request's own goroutine assembles
		// its record, which bounds the memory held by finished calls.
		done: make(chan *exchange, 64),
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
	if opts.Registry != nil {
		h.met = newMetrics(opts.Registry)
	}
	h.kinds = newDetector(opts, lg, h.met)
	h.warnUpstreams()
	if opts.LiveLineage {
		h.lin = lineage.NewTracker(lineage.Options{MaxBytes: opts.LineageBytes})
	}
	h.order = newArrivals()
	h.mux = h.routes()
	return h
}

// Start starts the record workers and the first probe of every [KindAuto]
// upstream, and returns once they run; until then ServeHTTP answers 503.
// ctx bounds the probes: when it is done, probes in flight give up and no
// new one starts (calls go on as [KindUnknown] until a kind is decided).
// The record workers run until [Handler.Close], so that exchanges still
// streaming after ctx is done (a graceful shutdown) are recorded. Start may
// be called once, before Close.
func (h *Handler) Start(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return errors.New("proxy: Start after Close")
	case h.started:
		return errors.New("proxy: Start called twice")
	}
	h.started = true
	h.kinds.start(ctx)
	for range h.opts.Workers {
		h.wg.Add(1)
		go h.assembleLoop()
	}
	h.running.Store(true)
	return nil
}

// defaults fills the zero fields of o.
func (o *Options) defaults() {
	if o.Anthropic == nil {
		o.Anthropic = o.Upstream
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 256 << 20
	}
	if o.BodyReadTimeout <= 0 {
		o.BodyReadTimeout = 5 * time.Minute
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 3 * time.Second
	}
	if o.Transport == nil {
		o.Transport = newTransport()
	}
	if o.Sink == nil {
		o.Sink = SinkFunc(func(*recorder.Call) {})
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LineageBytes <= 0 {
		o.LineageBytes = lineage.DefaultMaxBytes
	}
}

// ServeHTTP routes and serves one request. Before [Handler.Start], or after
// [Handler.Close], it answers 503 with a JSON error.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.running.Load() {
		WriteError(w, "", &Error{Status: http.StatusServiceUnavailable, Type: "unavailable",
			Message: "orchard proxy is not running: its Handler was not started, or is closed"})
		return
	}
	h.mux.ServeHTTP(w, r)
}

// Close stops the upstream-kind probes and waits for the records of
// finished exchanges to be handed to the sink. Call it once, after the
// server stopped sending requests; a Handler never started closes at once.
func (h *Handler) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errors.New("proxy: Close called twice")
	}
	h.closed = true
	h.running.Store(false)
	close(h.done)
	h.wg.Wait()
	h.kinds.close()
	return nil
}

func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil, // never route model traffic through an environment proxy
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		// HTTP/2 where a TLS upstream offers it, as Go's Transport does
		// without a dialer of its own; with dialUpstream it must be asked for.
		ForceAttemptHTTP2: true,
		// Compression is the client's business: the proxy forwards the
		// client's Accept-Encoding and never decompresses what it relays.
		DisableCompression: true,
		// Go's default 4 KiB: an upstreamConn reads the socket in bigger
		// pieces itself, into a buffer it holds only while they last.
		ReadBufferSize: 4 << 10,
		DialContext:    dialUpstream,
	}
}

// slogWriter sends the ReverseProxy's internal log lines to slog.
type slogWriter struct{ l *slog.Logger }

func (s slogWriter) Write(p []byte) (int, error) {
	s.l.Warn("reverse proxy", "detail", strings.TrimSpace(string(p)))
	return len(p), nil
}
