package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
)

// detector learns the kind of every [KindAuto] upstream from the server
// itself: GET {base}/models, whose owned_by vLLM and SGLang fill with their
// own names (vllm/entrypoints/openai ModelCard and sglang/srt/entrypoints/
// openai/protocol.py ModelCard both default it), and whose Anthropic form
// lists items of "type":"model".
//
// The first probe starts in [Handler.Start]. Until an upstream's kind is decided, a
// call waits for the probe in flight (or starts one: at most one at a time
// per upstream), each bounded by [Options.ProbeTimeout] and by the call's
// own context; after that the call goes on as [KindUnknown]. A decided kind
// is kept for the Handler's life, so in the steady state a call costs one
// atomic load. A probe is decided by any answer of the server: a listing,
// or a 4xx or garbage (then the kind is unknown, with a warning). Only a
// failure to get an answer (connection error, timeout, 5xx, 429) leaves it
// undecided, for the next call to probe again: a proxy started before its
// inference server learns the kind once the server is up.
type detector struct {
	client  *http.Client
	timeout time.Duration
	log     *slog.Logger
	met     *metrics
	ctx     context.Context // set by start; ends with Start's ctx or in close
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	states  map[*Upstream]*detection // fixed after newDetector
}

// detection is the state of one auto upstream.
type detection struct {
	up      *Upstream
	decided atomic.Value // UpstreamKind, once decided

	mu      sync.Mutex    // guards following
	probing chan struct{} // closed when the probe in flight ends; nil if none
	failed  bool          // the last probe got no answer (logged once)
}

func newDetector(opts Options, lg *slog.Logger, met *metrics) *detector {
	d := &detector{client: &http.Client{Transport: opts.Transport}, timeout: opts.ProbeTimeout,
		log: lg, met: met, states: make(map[*Upstream]*detection)}
	// Until start, a call gets no probe (the Handler serves none anyway).
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.cancel()
	ups := []*Upstream{opts.Upstream, opts.Anthropic}
	for _, up := range opts.Routes {
		ups = append(ups, up)
	}
	for _, up := range ups {
		if up.Kind != KindAuto {
			met.setKind(up.String(), "", up.Kind.behaves())
			continue
		}
		if d.states[up] == nil {
			d.states[up] = &detection{up: up}
		}
	}
	return d
}

// start starts the first probe of every auto upstream; probes end when ctx
// is done or in close. The Handler calls it once, before serving.
func (d *detector) start(ctx context.Context) {
	d.ctx, d.cancel = context.WithCancel(ctx)
	for _, st := range d.states {
		st.mu.Lock()
		d.startLocked(st)
		st.mu.Unlock()
	}
}

// close stops the probes in flight and waits for them.
func (d *detector) close() {
	d.cancel()
	d.wg.Wait()
}

// kind returns up's kind: its setting, or what detection decided, or
// KindUnknown while nothing is decided (after waiting for a probe).
func (d *detector) kind(ctx context.Context, up *Upstream) UpstreamKind {
	if up.Kind != KindAuto {
		return up.Kind
	}
	st := d.states[up]
	if st == nil {
		return KindUnknown // an Upstream New never saw
	}
	if k, _ := st.decided.Load().(UpstreamKind); k != "" {
		return k
	}
	st.mu.Lock()
	ch := st.probing
	if ch == nil {
		ch = d.startLocked(st)
	}
	st.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
	if k, _ := st.decided.Load().(UpstreamKind); k != "" {
		return k
	}
	return KindUnknown
}

// startLocked starts a probe of st and returns the channel its end closes.
func (d *detector) startLocked(st *detection) chan struct{} {
	ch := make(chan struct{})
	if d.ctx.Err() != nil { // closed: a call after Close gets no probe
		close(ch)
		return ch
	}
	st.probing = ch
	d.wg.Add(1)
	go d.probe(st, ch)
	return ch
}

// probe asks the server, reports the outcome and only then publishes it
// and closes done, so that a call which sees the kind also sees its log
// line and metric.
func (d *detector) probe(st *detection, done chan struct{}) {
	defer d.wg.Done()
	kind, evidence, err := d.ask(st.up)
	st.mu.Lock()
	first := err != nil && !st.failed
	st.failed = err != nil
	st.mu.Unlock()
	d.report(st.up.String(), kind, evidence, err, first)
	if err == nil {
		st.decided.Store(kind)
	}
	st.mu.Lock()
	st.probing = nil
	st.mu.Unlock()
	close(done)
}

// report logs a probe's outcome and sets the kind gauge; of a run of
// failures only the first is logged.
func (d *detector) report(name string, kind UpstreamKind, evidence string, err error, first bool) {
	switch {
	case err != nil:
		if first {
			d.met.setKind(name, "", KindUnknown)
			d.log.Warn("upstream kind probe got no answer; calls go as openai-compatible until one comes",
				"upstream", name, "err", err)
		}
		return
	case kind == KindUnknown:
		d.log.Warn("upstream kind unknown; treating it as openai-compatible, no token ids are asked for"+
			" (set --upstream-kind to override)", "upstream", name, "evidence", evidence)
	default:
		d.log.Info("upstream kind detected", "upstream", name, "kind", string(kind), "evidence", evidence)
	}
	d.met.setKind(name, KindUnknown, kind)
}

// ask fetches {base}/models. An error means the server gave no answer.
func (d *detector) ask(up *Upstream) (UpstreamKind, string, error) {
	ctx, cancel := context.WithTimeout(d.ctx, d.timeout)
	defer cancel()
	u := *up.BaseURL
	u.User, u.RawQuery, u.RawPath = nil, "", ""
	u.Path = strings.TrimSuffix(u.Path, "/") + "/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", "", fmt.Errorf("probe %s: %w", u.Redacted(), err)
	}
	if up.Key != "" {
		req.Header.Set("Authorization", "Bearer "+up.Key)
		req.Header.Set("X-Api-Key", up.Key)
	}
	req.Header.Set("Anthropic-Version", "2023-06-01") // Anthropic's listing requires it
	res, err := d.client.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("probe %s: %w", u.Redacted(), err)
	}
	defer res.Body.Close()
	if res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests {
		return "", "", fmt.Errorf("probe %s: status %d", u.Redacted(), res.StatusCode)
	}
	switch {
	case res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden:
		return KindUnknown, "GET /models answered status " + strconv.Itoa(res.StatusCode) +
			": it needs a credential (set --upstream-key)", nil
	case res.StatusCode != http.StatusOK:
		return KindUnknown, "GET /models answered status " + strconv.Itoa(res.StatusCode), nil
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return "", "", fmt.Errorf("probe %s: %w", u.Redacted(), err)
	}
	kind, evidence := kindFromModels(body)
	return kind, evidence, nil
}

// kindFromModels reads a model listing: the first model owned_by vllm or
// sglang names the server; Anthropic's items have "type":"model"; OpenAI's
// are owned by openai, system or an organisation.
func kindFromModels(body []byte) (UpstreamKind, string) {
	if !gjson.ValidBytes(body) {
		return KindUnknown, "GET /models answered something other than JSON"
	}
	data := gjson.GetBytes(body, "data")
	if !data.IsArray() || len(data.Array()) == 0 {
		return KindUnknown, "GET /models has no data list of models"
	}
	kind, evidence := KindUnknown, ""
	data.ForEach(func(_, m gjson.Result) bool {
		owner := m.Get("owned_by").String()
		switch {
		case owner == "vllm" || owner == "sglang":
			kind, evidence = UpstreamKind(owner), "owned_by "+strconv.Quote(owner)
		case m.Get("type").String() == "model" && !m.Get("owned_by").Exists():
			kind, evidence = KindAnthropic, `models of "type":"model"`
		case openAIOwner(owner):
			kind, evidence = KindOpenAI, "owned_by "+strconv.Quote(owner)
		}
		return kind == KindUnknown || kind == KindOpenAI
	})
	if kind == KindUnknown {
		evidence = "owned_by " + strconv.Quote(data.Get("0.owned_by").String()) + " names no server kind the proxy knows"
	}
	return kind, evidence
}

// openAIOwner reports whether owner is one OpenAI's own listing uses.
func openAIOwner(owner string) bool {
	switch owner {
	case "openai", "system", "openai-internal":
		return true
	}
	return strings.HasPrefix(owner, "org-") || strings.HasPrefix(owner, "user-")
}
