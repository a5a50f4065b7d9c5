package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
)

// exchange is the state of one proxied call. The request half is written
// by serveAPI before forwarding; the response half by the goroutine that
// copies the body, which hands the exchange to the record workers once,
// in finish. Nothing touches it concurrently.
type exchange struct {
	h    *Handler
	rest string       // path after /v1/
	api  recorder.API // "" for unrecorded routes
	att  attribution
	up   *Upstream
	kind UpstreamKind // up's kind for this call (detected for KindAuto)

	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   *idleTimer

	reqBody      []byte // as the client sent it, decoded
	reqEncoding  string
	reqDecodeErr string
	reqJSON      bool     // reqBody is one valid JSON value (encoding/json's judgement)
	sent         sentBody // what goes upstream
	patched      bool
	model        string
	stream       bool
	strip        stripRules
	injected     []string

	call         recorder.Call
	status       int
	headerAt     time.Time
	firstByte    time.Time
	respEncoding string
	sse          bool
	// resp collects the upstream body as received, unless asm assembles
	// the stream as it flows and has seen enough of it to produce a
	// response: then the record needs no raw copy and none is held.
	resp *bytes.Buffer
	asm  *assemble.Streamer
	// asmEvents: the stripper feeds asm event by event, not the tee.
	asmEvents bool
	// arrival numbers the exchange among its episode's (see arrivals).
	arrival uint64
	// shown is the body a non-streaming client got with the injected
	// fields stripped: the record's response (its tokens come from resp).
	shown []byte
	// stripGaveUp: an event outgrew the stripper, so the client got the
	// rest of the stream with the injected fields in it.
	stripGaveUp bool
	eof         bool
	readErr     error
	ended       time.Time
	done        bool
	// answered is set once the upstream's response has ended (or failed),
	// from the goroutine serving the request; record ordering reads it.
	answered atomic.Bool
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
	x.sent = wholeBody(body)
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
	// One validity check serves the patching and the record, and finds the
	// members the proxy reads. It is on the request path: jsonscan is 5-6x
	// faster than encoding/json (39 -> 7 us for 8 KB).
	m, ok := readMembers(x.reqBody)
	x.reqJSON = ok
	if ok {
		x.model, x.stream = m.get(memModel).String(), m.get(memStream).Bool()
	} else {
		x.model = gjson.GetBytes(x.reqBody, "model").String()
		x.stream = gjson.GetBytes(x.reqBody, "stream").Bool()
	}
	if up, ok := x.h.opts.Routes[x.model]; ok && x.model != "" {
		x.up = up
	}
	x.kind = x.h.kinds.kind(r.Context(), x.up)
	if m != nil {
		x.patchRequest(m)
	}
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
		Path:         pathAndQuery(r.URL),
		Model:        x.model,
		Stream:       x.stream,
		StartedAt:    start.UTC(),
		Upstream:     x.up.String(),
		UpstreamKind: string(x.kind),
		Harness:      r.Header.Get("User-Agent"),
		Injected:     x.injected,
	}
}

// pathAndQuery returns the request's path with its query string, if any:
// the record keeps what the client asked for (api-version=..., beta=true).
func pathAndQuery(u *url.URL) string {
	if u.RawQuery == "" {
		return u.Path
	}
	return u.Path + "?" + u.RawQuery
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

// tee passes the upstream body through untouched while keeping a copy for
// the record. Its Close ends the exchange.
type tee struct {
	x  *exchange
	rc io.ReadCloser
}

// respBufs recycles response copies; record returns them once the record
// no longer needs the bytes. Huge ones are left to the GC.
var respBufs = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 16<<10)) }}

func putRespBuf(b *bytes.Buffer) {
	if b.Cap() > 4<<20 {
		return
	}
	b.Reset()
	respBufs.Put(b)
}

func (t *tee) Read(p []byte) (int, error) {
	n, err := t.rc.Read(p)
	x := t.x
	if n > 0 {
		if x.firstByte.IsZero() {
			x.firstByte = time.Now()
		}
		x.collect(p[:n])
		x.idle.touch()
	}
	if err == io.EOF {
		x.eof = true
		x.answered.Store(true)
	} else if err != nil && x.readErr == nil {
		x.readErr = err
		x.answered.Store(true)
	}
	return n, err
}

// collect keeps what the record needs of the next body bytes.
func (x *exchange) collect(p []byte) {
	if x.asm != nil {
		if !x.asmEvents {
			x.asm.Write(p)
		}
		if x.asm.Started() {
			if x.resp != nil {
				putRespBuf(x.resp)
				x.resp = nil
			}
			return
		}
	}
	if x.resp == nil {
		x.resp = respBufs.Get().(*bytes.Buffer)
	}
	x.resp.Write(p)
}

func (t *tee) Close() error {
	err := t.rc.Close()
	t.x.finish()
	return err
}

// finish hands the exchange to the record workers. It runs once, on the
// goroutine that served the request; if the workers are saturated it
// assembles the record itself rather than drop it.
func (x *exchange) finish() {
	if x.done {
		return
	}
	x.done = true
	x.answered.Store(true)
	x.ended = time.Now()
	if x.idle != nil {
		x.idle.stop()
	}
	// Decide now, while the contexts still say why the exchange ended.
	x.call.EndReason = x.endReason()
	select {
	case x.h.done <- x:
	default:
		x.h.record(x)
	}
}

// endReason classifies how the exchange ended, before the body is parsed:
// "done" may still become "eof" for a stream without its terminal event.
func (x *exchange) endReason() recorder.EndReason {
	switch {
	case x.eof || x.status == http.StatusNotModified:
		// The upstream's answer is complete even if the client hung up
		// right after reading it.
		return recorder.EndDone
	case errors.Is(context.Cause(x.ctx), errIdleTimeout):
		return recorder.EndIdleTimeout
	case x.ctx.Err() != nil:
		return recorder.EndClientGone
	case x.readErr != nil:
		return recorder.EndUpstreamError
	default:
		// The copy stopped before EOF without a read error: the client
		// stopped reading.
		return recorder.EndClientGone
	}
}

// newCallID returns a 32-hex-digit id that sorts by start time.
func newCallID(t time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixNano()))
	rand.Read(b[8:])
	return "call_" + hex.EncodeToString(b[:])
}

// readAll reads at most limit bytes of r into one buffer sized from the
// declared length plus one byte, so a body of the declared length is read
// without being copied again: bytes.Buffer.ReadFrom, which this used, grows
// its buffer whenever fewer than 512 bytes are free before a read, so a body
// that arrived in pieces, the last of them under 512 bytes, was copied into
// a buffer twice its size.
func readAll(r io.Reader, declared, limit int64) ([]byte, error) {
	if declared < 0 || declared >= limit {
		declared = 512
	}
	buf := make([]byte, 0, declared+1)
	r = io.LimitReader(r, limit)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, len(buf)) // doubles, as append would
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
