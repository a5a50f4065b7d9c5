package llmtest

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/tidwall/gjson"
)

// Request headers the server understands.
const (
	HeaderScript = "X-Llmtest-Script" // script name, overriding the request's model
	HeaderTurn   = "X-Llmtest-Turn"   // turn index, overriding the history count
	HeaderFault  = "X-Llmtest-Fault"  // fault spec, overriding the script's
)

// DefaultScript is the script used when the request's model names none.
const DefaultScript = "default"

// Options configures a [Handler].
type Options struct {
	// ScriptsDir holds the *.json scripts; "" means [DefaultScriptsDir].
	ScriptsDir string
	// Scripts adds (or replaces) scripts by name, for tests that build them
	// in code. When set and ScriptsDir is "", no directory is read.
	Scripts map[string]*Script
	// Server is the server GET /v1/models imitates: ProfileVLLM or
	// ProfileSGLang (owned_by names the engine), ProfileOpenAI (owned_by
	// "system") or ServerAnthropic (Anthropic's listing). "" lists the
	// scripts as owned_by "llmtest", which names no real server.
	Server string
}

// ServerAnthropic makes GET /v1/models answer in Anthropic's format.
const ServerAnthropic = "anthropic"

// Request is one request as the server received it.
type Request struct {
	Seq      int    // 1-based arrival order
	Method   string // e.g. "POST"
	Path     string // URL path, e.g. "/v1/chat/completions"
	RawQuery string // e.g. "beta=true"
	Header   http.Header
	Body     []byte // as received (still compressed if it was)
	Script   string // script that answered, "" if none
	Turn     int    // turn that answered
	Canceled bool   // the request's context ended before the response did
}

// Handler is the scripted upstream as an http.Handler. It is safe for
// concurrent use.
type Handler struct {
	scripts map[string]*Script
	server  string
	mux     *http.ServeMux
	done    chan struct{} // closed by Close: releases hung streams
	once    sync.Once
	cancels chan *Request

	mu     sync.Mutex // guards following
	reqs   []*Request
	notify chan struct{} // closed and replaced when a request arrives
}

// NewHandler loads the scripts and returns the handler.
func NewHandler(opts Options) (*Handler, error) {
	scripts := map[string]*Script{}
	if opts.ScriptsDir != "" || opts.Scripts == nil {
		dir := opts.ScriptsDir
		if dir == "" {
			d, err := DefaultScriptsDir()
			if err != nil {
				return nil, err
			}
			dir = d
		}
		loaded, err := LoadScripts(dir)
		if err != nil {
			return nil, err
		}
		scripts = loaded
	}
	for name, s := range opts.Scripts {
		if err := s.validate(); err != nil {
			return nil, fmt.Errorf("script %s: %w", name, err)
		}
		s.Name = name
		scripts[name] = s
	}
	h := &Handler{scripts: scripts, server: opts.Server, done: make(chan struct{}), cancels: make(chan *Request, 1024),
		notify: make(chan struct{})}
	h.routes()
	return h, nil
}

func (h *Handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("POST /v1/chat/completions", h.generate(apiChat))
	m.HandleFunc("POST /v1/completions", h.generate(apiCompletions))
	m.HandleFunc("POST /v1/responses", h.generate(apiResponses))
	m.HandleFunc("POST /v1/messages", h.generate(apiMessages))
	m.HandleFunc("POST /v1/messages/count_tokens", h.countTokens)
	m.HandleFunc("POST /v1/embeddings", h.embeddings)
	m.HandleFunc("GET /v1/models", h.models)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, apiChat, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
	})
	h.mux = m
}

// ServeHTTP records the request and answers it from its script.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Requests returns a copy of the requests received so far, in arrival order.
func (h *Handler) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Request, len(h.reqs))
	for i, r := range h.reqs {
		out[i] = *r
	}
	return out
}

// WaitRequests blocks until at least n requests have arrived (their bodies
// read and recorded) or ctx ends, so tests can act while a request is held by
// a hang or delay fault without sleeping.
func (h *Handler) WaitRequests(ctx context.Context, n int) error {
	for {
		h.mu.Lock()
		got, ch := len(h.reqs), h.notify
		h.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for %d requests (have %d): %w", n, got, ctx.Err())
		}
	}
}

// Canceled delivers each request whose context ended (the client or proxy
// went away) before its response was complete, for tests that assert the
// upstream saw the cancellation. It buffers 1024 requests.
func (h *Handler) Canceled() <-chan *Request { return h.cancels }

// Close releases streams hung by a hang_after fault. It is idempotent.
func (h *Handler) Close() { h.once.Do(func() { close(h.done) }) }

// record stores the request and returns it with its decoded body.
func (h *Handler) record(r *http.Request) (*Request, []byte, error) {
	body, err := io.ReadAll(r.Body)
	rec := &Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body}
	h.mu.Lock()
	h.reqs = append(h.reqs, rec)
	rec.Seq = len(h.reqs)
	close(h.notify)
	h.notify = make(chan struct{})
	h.mu.Unlock()
	if err != nil {
		return rec, nil, fmt.Errorf("read request body: %w", err)
	}
	dec, err := decodeBody(r.Header.Get("Content-Encoding"), body)
	return rec, dec, err
}

// setRec updates a recorded request under the lock.
func (h *Handler) setRec(rec *Request, f func(*Request)) {
	h.mu.Lock()
	f(rec)
	h.mu.Unlock()
}

// canceled marks rec canceled and announces it.
func (h *Handler) canceled(rec *Request) {
	h.setRec(rec, func(r *Request) { r.Canceled = true })
	c := *rec
	select {
	case h.cancels <- &c:
	default:
	}
}

func decodeBody(enc string, body []byte) ([]byte, error) {
	switch enc {
	case "", "identity":
		return body, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("gzip request body: %w", err)
		}
		return io.ReadAll(zr)
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("zstd request body: %w", err)
		}
		defer zr.Close()
		return io.ReadAll(zr)
	}
	return nil, fmt.Errorf("unsupported Content-Encoding %q", enc)
}

// pick chooses the script and turn for a request.
func (h *Handler) pick(r *http.Request, api string, req gjson.Result) (*Script, int, error) {
	name := r.Header.Get(HeaderScript)
	if name == "" {
		name = req.Get("model").String()
	}
	s := h.scripts[name]
	if s == nil {
		s = h.scripts[DefaultScript]
	}
	if s == nil {
		return nil, 0, fmt.Errorf("the model `%s` does not exist", name)
	}
	k := assistantTurns(api, req)
	if v := r.Header.Get(HeaderTurn); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, 0, fmt.Errorf("bad %s %q", HeaderTurn, v)
		}
		k = n
	}
	return s, min(k, len(s.Turns)-1), nil
}

// assistantTurns counts the model turns already in the request's history.
func assistantTurns(api string, req gjson.Result) int {
	n := 0
	switch api {
	case apiChat, apiMessages:
		req.Get("messages").ForEach(func(_, m gjson.Result) bool {
			if m.Get("role").String() == "assistant" {
				n++
			}
			return true
		})
	case apiResponses:
		prevModel := false
		req.Get("input").ForEach(func(_, it gjson.Result) bool {
			t := it.Get("type").String()
			model := it.Get("role").String() == "assistant" || slices.Contains(
				[]string{"function_call", "reasoning", "custom_tool_call"}, t)
			if model && !prevModel {
				n++
			}
			prevModel = model
			return true
		})
	}
	return n
}

// Server is a [Handler] served by an httptest.Server on 127.0.0.1.
type Server struct {
	*Handler
	hs *httptest.Server
}

// NewServer starts a server. It panics if the scripts cannot be loaded: a
// broken testdata script is a bug in the test, not a condition to handle.
func NewServer(opts Options) *Server {
	h, err := NewHandler(opts)
	if err != nil {
		panic("llmtest: " + err.Error())
	}
	return &Server{Handler: h, hs: httptest.NewServer(h)}
}

// URL is the server's base URL, e.g. "http://127.0.0.1:PORT" (append "/v1"
// for an OpenAI base URL).
func (s *Server) URL() string { return s.hs.URL }

// Client returns an http.Client for the server.
func (s *Server) Client() *http.Client { return s.hs.Client() }

// Close releases hung streams, then shuts the server down and waits for its
// handlers.
func (s *Server) Close() {
	s.Handler.Close()
	s.hs.CloseClientConnections()
	s.hs.Close()
}
