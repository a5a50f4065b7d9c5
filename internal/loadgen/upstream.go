package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/tidwall/gjson"
)

// Upstream is the benchmark's inference server: it answers POST
// /v1/chat/completions with the scenario's pre-rendered vLLM stream for the
// request's turn (its count of assistant messages), honouring
// stream_options.include_usage, return_token_ids and logprobs, paced by
// the scenario's delays. Rendering ahead keeps its own CPU cost small, so
// that on a small machine the proxies under test get the CPU. GET /healthz
// answers 200, and GET /v1/models lists the model as vLLM does (owned_by
// "vllm"), so a proxy that detects its upstream's kind finds vLLM. It is
// safe for concurrent use.
type Upstream struct {
	sc     Scenario
	r      *rendered
	models []byte // the GET /v1/models body
}

// NewUpstream renders the scenario's streams.
func NewUpstream(sc Scenario) (*Upstream, error) {
	sc.Defaults()
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	r, err := sc.render()
	if err != nil {
		return nil, err
	}
	return &Upstream{sc: sc, r: r, models: modelList(time.Now())}, nil
}

var assistantRole = []byte(`"role":"assistant"`)

// ServeHTTP answers one request.
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/healthz":
		w.WriteHeader(http.StatusOK)
		return
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(u.models)
		return
	case r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions":
		http.Error(w, "no route for "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	b := body.Bytes()
	if !gjson.GetBytes(b, "stream").Bool() {
		http.Error(w, "the benchmark upstream only streams", http.StatusBadRequest)
		return
	}
	k := min(bytes.Count(b, assistantRole), u.sc.Turns-1)
	v := u.sc.variantOf(gjson.GetBytes(b, "stream_options.include_usage").Bool(),
		gjson.GetBytes(b, "return_token_ids").Bool(), gjson.GetBytes(b, "logprobs").Bool())
	u.stream(w, r.Context(), u.r.events[v][k])
}

// stream writes the events one write and one flush each, as vLLM's server
// sends one chunk per token.
func (u *Upstream) stream(w http.ResponseWriter, ctx context.Context, events [][]byte) {
	if !sleep(ctx, u.sc.FirstByteDelay) {
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	for i, ev := range events {
		if i > 0 && !sleep(ctx, u.sc.ChunkDelay) {
			return
		}
		if _, err := w.Write(ev); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// sleep waits d unless ctx ends first; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// serve runs h on addr until ctx ends, then shuts down within 5s.
func serve(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err = <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServeUpstream runs an [Upstream] for sc on addr until ctx ends: the
// `orchard-bench upstream` process.
func ServeUpstream(ctx context.Context, addr string, sc Scenario) error {
	u, err := NewUpstream(sc)
	if err != nil {
		return err
	}
	return serve(ctx, addr, u)
}
