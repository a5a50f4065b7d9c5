package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/jsonscan"
	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
)

type exchangeKey struct{}

// serveAPI forwards one request under /v1/ and, for the recorded APIs,
// records it.
func (h *Handler) serveAPI(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rest := chi.URLParam(r, "*")
	api := apiFor(r.Method, rest)
	if hasDotSegment(r.URL.Path) || hasDotSegment(rest) {
		writeError(w, api, badRequest("path "+quote(r.URL.Path)+" has a . or .. segment; send the path as the API names it"))
		return
	}
	att, aerr := h.attribute(r)
	if aerr != nil {
		writeError(w, api, aerr)
		return
	}
	x := &exchange{h: h, rest: rest, api: api, att: att, up: h.opts.Upstream}
	if isAnthropic(rest) {
		x.up = h.opts.Anthropic
	}
	if api != "" {
		if e := x.readRequestBy(w, r); e != nil {
			writeError(w, api, e)
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
	h.rp.ServeHTTP(w, r.WithContext(context.WithValue(ctx, exchangeKey{}, x)))
}

// readRequestBy is readRequest under the body read deadline, which is
// lifted afterwards so that it never limits the response stream.
func (x *exchange) readRequestBy(w http.ResponseWriter, r *http.Request) *Error {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(x.h.opts.BodyReadTimeout)) // unsupported writers (tests' recorders) just have none
	e := x.readRequest(r)
	var ne net.Error
	if e != nil && e.Status == http.StatusBadRequest && errors.As(e.cause, &ne) && ne.Timeout() {
		// The deadline stays: the server's read of the rest of the body
		// fails too, and it closes the connection of the slow client.
		w.Header().Set("Connection", "close")
		return &Error{Status: http.StatusRequestTimeout, Type: "invalid_request_error",
			Message: "the request body did not arrive within " + x.h.opts.BodyReadTimeout.String() + " (raise --body-timeout)"}
	}
	rc.SetReadDeadline(time.Time{})
	return e
}

// readRequest reads the body of a recorded call, decides what to send
// upstream and what to strip from the response.
func (x *exchange) readRequest(r *http.Request) *Error {
	max := x.h.opts.MaxBodyBytes
	tooBig := &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
		Message: "request body is larger than the proxy's limit of " + strconv.FormatInt(max, 10) + " bytes (raise --max-body)"}
	if r.ContentLength > max {
		return tooBig
	}
	body, err := readAll(r.Body, r.ContentLength, max+1)
	if err != nil {
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "reading the request body: " + err.Error(), cause: err}
	}
	if int64(len(body)) > max {
		return tooBig
	}
	r.Body.Close()
	x.sent = body
	x.reqEncoding = r.Header.Get("Content-Encoding")
	x.reqBody = body
	if x.reqEncoding != "" {
		dec, err := decodeBody(x.reqEncoding, body, requestDecodeLimit(len(body), max))
		if errors.Is(err, errDecodedTooLarge) {
			// Nothing of it is forwarded or stored: a record of it could
			// be too large to read back, and the bytes are most likely an
			// attack on the proxy's memory.
			return &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
				Message: "request body inflates past the proxy's limit of " + strconv.FormatInt(requestDecodeLimit(len(body), max), 10) +
					" bytes (" + x.reqEncoding + "; the limit is --max-body, and at most " + strconv.Itoa(maxDecodeRatio) + "x the encoded size above 8 MiB)"}
		}
		if err != nil {
			// Forward unchanged; record the bytes as they came.
			x.reqDecodeErr = err.Error()
			return nil
		}
		x.reqBody = dec
	}
	// One validity check serves the patching and the record. It is on the
	// request path: jsonscan is 5-6x faster than encoding/json (39 -> 7 us
	// for 8 KB) and accepts nothing encoding/json rejects (FuzzValid), so
	// encoding/json only judges what jsonscan rejects.
	x.reqJSON = jsonscan.Valid(x.reqBody) || json.Valid(x.reqBody)
	x.model = gjson.GetBytes(x.reqBody, "model").String()
	if up, ok := x.h.opts.Routes[x.model]; ok && x.model != "" {
		x.up = up
	}
	x.stream = gjson.GetBytes(x.reqBody, "stream").Bool()
	x.kind = x.h.kinds.kind(r.Context(), x.up)
	x.patchRequest()
	return nil
}

// begin fills the parts of the record known before forwarding.
func (x *exchange) begin(r *http.Request, start time.Time) {
	x.call = recorder.Call{
		Schema:       recorder.CallSchema,
		EpisodeID:    x.att.episode,
		CallID:       newCallID(start),
		API:          x.api,
		Method:       r.Method,
		Path:         r.URL.Path,
		Model:        x.model,
		Stream:       x.stream,
		StartedAt:    start.UTC(),
		Upstream:     x.up.String(),
		UpstreamKind: string(x.kind),
		Harness:      r.Header.Get("User-Agent"),
		Injected:     x.injected,
	}
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
	if x.sent != nil {
		pr.Out.Body = io.NopCloser(bytes.NewReader(x.sent))
		pr.Out.ContentLength = int64(len(x.sent))
		pr.Out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(x.sent)), nil }
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

// setCredentials replaces the client's credential with the upstream key,
// in the header the client used. Without an upstream key the client's own
// credential goes through, unless it is an episode token, which never
// leaves the proxy.
func (x *exchange) setCredentials(hdr http.Header) {
	key := x.up.Key
	if key == "" {
		if x.att.viaToken {
			hdr.Del("Authorization")
			hdr.Del("X-Api-Key")
		}
		return
	}
	kind := x.att.credKind
	hdr.Del("Authorization")
	hdr.Del("X-Api-Key")
	if kind == credNone {
		kind = credBearer
		if isAnthropic(x.rest) {
			kind = credAPIKey
		}
	}
	if kind == credAPIKey {
		hdr.Set("X-Api-Key", key)
	} else {
		hdr.Set("Authorization", "Bearer "+key)
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
			// assembler; the tee only keeps the raw bytes.
			body = newStripper(body, x.strip, x.asm)
			x.asmEvents = x.asm != nil
		} else {
			return stripWhole(res, body, x.strip)
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
	writeError(w, x.api, &Error{Status: status, Type: "upstream_error", Message: msg})
}

// readAll reads at most limit bytes of r into one buffer sized from the
// declared length, so a large body is not copied again as it grows.
func readAll(r io.Reader, declared, limit int64) ([]byte, error) {
	if declared < 0 || declared >= limit {
		declared = 512
	}
	buf := bytes.NewBuffer(make([]byte, 0, declared+1))
	_, err := buf.ReadFrom(io.LimitReader(r, limit))
	return buf.Bytes(), err
}
