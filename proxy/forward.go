package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/orchard-rl/orchard/proxy/assemble"
)

type exchangeKey struct{}

// serveAPI forwards one request under /v1/ and, for the recorded APIs,
// records it.
func (h *Handler) serveAPI(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rest := chi.URLParam(r, "*")
	api := apiFor(r.Method, rest)
	if hasDotSegment(r.URL.Path) || hasDotSegment(rest) {
		WriteError(w, api, badRequest("path "+quote(r.URL.Path)+" has a . or .. segment; send the path as the API names it"))
		return
	}
	att, aerr := h.attribute(r)
	if aerr != nil {
		WriteError(w, api, aerr)
		return
	}
	x := &exchange{h: h, rest: rest, api: api, att: att, up: h.opts.Upstream}
	if isAnthropic(rest) {
		x.up = h.opts.Anthropic
	}
	if api != "" {
		if e := x.readRequestBy(w, r); e != nil {
			WriteError(w, api, e)
			return
		}
		x.begin(r, start)
		h.order.begin(x)
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(context.Canceled)
	x.ctx, x.cancel = ctx, cancel
	if api != "" {
		x.idle = newIdleTimer(h.opts.IdleTimeout, func() { cancel(errIdleTimeout) })
	}
	h.rp.ServeHTTP(withLazyFlush(w, r), r.WithContext(context.WithValue(ctx, exchangeKey{}, x)))
}

// rewrite builds the upstream request: target URL, credentials, body.
func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	x, _ := pr.In.Context().Value(exchangeKey{}).(*exchange)
	u := *x.up.BaseURL
	u.User = nil
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + x.rest
	u.RawPath = ""
	u.RawQuery = pr.In.URL.RawQuery
	pr.Out.URL = &u
	pr.Out.Host = ""
	hdr := pr.Out.Header
	for k := range hdr {
		if strings.HasPrefix(k, "X-Orchard-") {
			delete(hdr, k)
		}
	}
	x.setCredentials(hdr)
	if sent := x.sent; !sent.none() {
		pr.Out.Body = sent.reader()
		pr.Out.ContentLength = int64(sent.len())
		pr.Out.GetBody = func() (io.ReadCloser, error) { return sent.reader(), nil }
		if x.patched {
			// The patched body is the decoded JSON; say so.
			hdr.Del("Content-Encoding")
		}
	}
	if x.strip.any() {
		// Stripping edits events, so ask for a body we can read as it flows.
		hdr.Set("Accept-Encoding", "identity")
	} else if ae := hdr.Get("Accept-Encoding"); ae != "" {
		hdr.Set("Accept-Encoding", recordableEncodings(ae))
	}
}

// modifyResponse tees the upstream body into the record and, when the
// request was patched, strips what the client did not ask for.
func (h *Handler) modifyResponse(res *http.Response) error {
	x, _ := res.Request.Context().Value(exchangeKey{}).(*exchange)
	if x == nil || x.api == "" {
		return nil
	}
	x.status = res.StatusCode
	x.headerAt = time.Now()
	x.respEncoding = res.Header.Get("Content-Encoding")
	x.sse = strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream")
	x.idle.touch()
	if x.sse && x.respEncoding == "" && res.StatusCode >= 200 && res.StatusCode < 300 && assembles(x.api) {
		x.asm, _ = assemble.NewStreamer(x.api) // assembles(x.api) guarantees support
	}
	var body io.ReadCloser = &tee{x: x, rc: res.Body}
	if x.strip.any() && x.respEncoding == "" && res.StatusCode == http.StatusOK {
		if x.sse {
			// The stripper frames the events and hands them to the
			// assembler, which keeps of the injected fields only what the
			// record's tokens need; the tee only keeps the raw bytes.
			st := newStripper(body, x.strip, x.asm)
			st.gaveUp = &x.stripGaveUp
			body = st
			if x.asm != nil {
				x.asm.Hide(x.strip.fields)
				x.asmEvents = true
			}
		} else {
			x.shown = stripWhole(res, body, x.strip)
			return nil
		}
	}
	res.Body = body
	return nil
}

// upstreamError answers a request whose upstream could not be reached or
// went quiet before its response headers.
func (h *Handler) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	x, _ := r.Context().Value(exchangeKey{}).(*exchange)
	status := statusFor(r.Context(), err)
	msg := "upstream request failed: " + err.Error()
	if status == http.StatusGatewayTimeout {
		msg = "upstream sent nothing for " + h.opts.IdleTimeout.String() + "; the request was abandoned"
	}
	if x != nil && x.api != "" {
		x.status = status
		x.readErr = err
		defer x.finish()
	}
	if r.Context().Err() != nil && context.Cause(r.Context()) == context.Canceled {
		return // the client is gone; nobody to answer
	}
	h.log.Warn("upstream request failed", "upstream", x.up.String(), "path", r.URL.Path, "err", err)
	WriteError(w, x.api, &Error{Status: status, Type: "upstream_error", Message: msg})
}
