package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
)

// exchange is the state of one proxied call. The request half is written
// by serveAPI before forwarding; the response half by the goroutine that
// copies the body, which hands the exchange to the record workers once,
// in finish. Nothing touches it concurrently.
type exchange struct {
	h    *Handler
	rest string // path after /v1/
	api  string // "" for unrecorded routes
	att  attribution
	up   *Upstream
	kind UpstreamKind // up's kind for this call (detected for KindAuto)

	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   *idleTimer

	reqBody      []byte // as the client sent it, decoded
	reqEncoding  string
	reqDecodeErr string
	reqJSON      bool   // reqBody is one valid JSON value (encoding/json's judgement)
	sent         []byte // what goes upstream
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
	eof       bool
	readErr   error
	ended     time.Time
	done      bool
	// answered is set once the upstream's response has ended (or failed),
	// from the goroutine serving the request; record ordering reads it.
	answered atomic.Bool
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
func (x *exchange) endReason() string {
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

func (h *Handler) assembleLoop() {
	defer h.wg.Done()
	for x := range h.done {
		h.record(x)
	}
}

// newCallID returns a 32-hex-digit id that sorts by start time.
func newCallID(t time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixNano()))
	rand.Read(b[8:])
	return "call_" + hex.EncodeToString(b[:])
}
