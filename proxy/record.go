package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/orchard-rl/orchard/internal/sse"
	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
)

// assembleLoop is a record worker: it records the exchanges finish hands
// over until Close.
func (h *Handler) assembleLoop() {
	defer h.wg.Done()
	for x := range h.done {
		h.record(x)
	}
}

// record turns a finished exchange into its orchard.call/v1 record and hands
// it to the sink. It runs on a record worker, off the request path.
func (h *Handler) record(x *exchange) {
	c := new(recorder.Call)
	*c = x.call
	c.Status = x.status
	c.EndedAt = x.ended.UTC()
	switch {
	case !x.firstByte.IsZero():
		t := x.firstByte.UTC()
		c.FirstByteAt = &t
	case !x.headerAt.IsZero():
		t := x.headerAt.UTC()
		c.FirstByteAt = &t
	}
	if x.reqJSON && utf8.Valid(x.reqBody) {
		c.Request = x.reqBody
	} else if len(x.reqBody) > 0 {
		c.RequestRaw = true
		c.Request, c.RequestEncoding = keepBytes(x.reqBody)
	}
	if x.reqDecodeErr != "" {
		c.Error = "request body kept as sent: " + x.reqDecodeErr
	}
	if x.readErr != nil && c.EndReason == recorder.EndUpstreamError {
		c.Error = x.readErr.Error()
	}
	if x.stripGaveUp && c.Error == "" {
		c.Error = "an event outgrew the proxy's " + strconv.Itoa(sse.DefaultMaxEvent>>20) + " MiB event limit, so the client got " +
			"the rest of the stream unstripped, with the token fields the proxy asked for (the record's response leaves them out)"
	}
	h.notFoundHint(c)
	if x.resp != nil || x.asm != nil {
		h.recordResponse(c, x)
		if x.resp != nil {
			putRespBuf(x.resp)
			x.resp = nil
		}
	}
	// The record owns what it needs now. Drop the rest: the server and the
	// transport can keep a connection's last request (and so x) reachable
	// until the next one, and a stream's assembly state holds its token ids.
	x.asm, x.reqBody, x.sent = nil, nil, sentBody{}
	// The request is the body jsonscan or encoding/json found valid, or
	// keepBytes' JSON string; the response is the assembler's (valid by
	// construction: FuzzStream holds it to that), jsonOrString's or empty.
	c.Checked = true
	h.order.submit(x, c, h.release)
}

// Forget lets go of an episode's lineage state once the calls of it that
// have arrived are recorded; call it when the episode has finished, so that
// the state of finished episodes does not fill the tracker's budget. A call
// of the episode that arrives after that starts its lineage over, as a
// root.
func (h *Handler) Forget(episode string) {
	if h.lin == nil {
		return
	}
	h.order.whenDone(episode, func() { h.lin.Forget(episode) })
}

// release classifies a record against the earlier calls of its episode
// (with Options.LiveLineage) and hands it to the sink; arrivals calls it in
// arrival order.
func (h *Handler) release(c *recorder.Call) {
	if h.lin != nil {
		if l, ok := h.lin.Observe(c); ok {
			c.Lineage = &l
		}
	}
	h.met.observe(c)
	h.opts.Sink.Record(c)
}

func (h *Handler) recordResponse(c *recorder.Call, x *exchange) {
	if x.asm != nil {
		// Assembled as it flowed: x.resp holds the body only if the stream
		// never got far enough to yield a response.
		var raw []byte
		if x.resp != nil {
			raw = x.resp.Bytes()
		}
		h.assembled(c, x.asm.Result(), raw, true)
		return
	}
	if x.resp == nil {
		return
	}
	body, err := decodeBody(x.respEncoding, x.resp.Bytes(), h.opts.MaxBodyBytes)
	if err != nil {
		c.Response, c.ResponseEncoding = jsonOrString(bytes.Clone(x.resp.Bytes()))
		c.Error = "response kept as received: " + err.Error()
		return
	}
	if c.Status < 200 || c.Status >= 300 || !assembles(c.API) {
		c.Response, c.ResponseEncoding = jsonOrString(bytes.Clone(body))
		return
	}
	if x.sse {
		h.assembled(c, assemble.Stream(c.API, body), body, true)
		return
	}
	res := assemble.JSON(c.API, body)
	if x.shown != nil && res.Done {
		res.Response = x.shown // as the client got it; the tokens are the upstream's
	}
	h.assembled(c, res, body, false)
}

// assembled fills the record from an assembly result; body is the raw body
// the result came from, when it was kept (nil otherwise); stream says it
// was an SSE body.
func (h *Handler) assembled(c *recorder.Call, res assemble.Result, body []byte, stream bool) {
	if stream && c.EndReason == recorder.EndDone && !res.Done {
		c.EndReason = recorder.EndEOF
	}
	// The buffer goes back to the pool: keep nothing that points into it.
	res.Response, res.Usage = owned(res.Response, body), owned(res.Usage, body)
	c.Response, c.Usage, c.Tokens = res.Response, res.Usage, res.Tokens
	if c.Model == "" {
		c.Model = res.Model
	}
	if res.Err != "" && c.Error == "" {
		c.Error = res.Err
	}
	if c.Response == nil && body != nil {
		c.Response, c.ResponseEncoding = jsonOrString(bytes.Clone(body))
	}
}

// assembles reports whether api's responses are reassembled for the record.
func assembles(api recorder.API) bool {
	switch api {
	case recorder.APIChatCompletions, recorder.APICompletions, recorder.APIResponses, recorder.APIMessages:
		return true
	}
	return false
}

// jsonOrString returns b itself when it is one valid UTF-8 JSON value, else
// b kept by [keepBytes], so that a malformed body is still recorded exactly.
func jsonOrString(b []byte) (json.RawMessage, string) {
	if len(b) == 0 {
		return nil, ""
	}
	if utf8.Valid(b) && json.Valid(b) {
		return json.RawMessage(b), ""
	}
	return keepBytes(b)
}

// keepBytes returns b as a JSON string: the text itself when b is valid
// UTF-8, else its base64 and [recorder.EncodingBase64]. Either way the
// bytes come back exactly (encoding/json would turn invalid UTF-8 into
// U+FFFD).
func keepBytes(b []byte) (json.RawMessage, string) {
	if utf8.Valid(b) {
		s, _ := json.Marshal(string(b))
		return s, ""
	}
	s, _ := json.Marshal(base64.StdEncoding.EncodeToString(b))
	return s, recorder.EncodingBase64
}

// owned returns b, copied if it points into buf.
func owned(b json.RawMessage, buf []byte) json.RawMessage {
	if len(b) == 0 || cap(buf) == 0 {
		return b
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p >= start && p < start+uintptr(cap(buf)) {
		return bytes.Clone(b)
	}
	return b
}
