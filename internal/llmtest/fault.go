package llmtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// fault is a parsed fault spec: comma- or semicolon-separated key=value pairs.
//
//	status=503          answer with this HTTP status and a realistic error body
//	reset_after=N       reset the TCP connection after N stream events
//	                    (non-streaming: after half the body)
//	hang_after=N        stop after N events and hang until the request is
//	                    canceled (non-streaming: before the headers)
//	eof_after=N         end the body cleanly after N events, without the
//	                    terminal event
//	first_byte_delay=D  wait D (a Go duration) before the response headers
//	chunk_delay=D       wait D between stream events
type fault struct {
	status         int
	resetAfter     int // -1 when unset, like the other counts
	hangAfter      int
	eofAfter       int
	firstByteDelay time.Duration
	chunkDelay     time.Duration
}

func parseFault(spec string) (fault, error) {
	f := fault{resetAfter: -1, hangAfter: -1, eofAfter: -1}
	for part := range strings.FieldsFuncSeq(spec, func(r rune) bool { return r == ',' || r == ';' }) {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return f, fmt.Errorf("fault %q: want key=value", part)
		}
		var err error
		switch k {
		case "status":
			f.status, err = strconv.Atoi(v)
			if err == nil && (f.status < 100 || f.status > 599) {
				err = fmt.Errorf("out of range")
			}
		case "reset_after":
			f.resetAfter, err = count(v)
		case "hang_after":
			f.hangAfter, err = count(v)
		case "eof_after":
			f.eofAfter, err = count(v)
		case "first_byte_delay":
			f.firstByteDelay, err = time.ParseDuration(v)
		case "chunk_delay":
			f.chunkDelay, err = time.ParseDuration(v)
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			return f, fmt.Errorf("fault %q: %w", part, err)
		}
	}
	return f, nil
}

func count(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err == nil && n < 0 {
		err = fmt.Errorf("negative count")
	}
	return n, err
}

// wait sleeps for d unless ctx or done ends first; it reports whether the
// full delay elapsed.
func wait(ctx context.Context, done <-chan struct{}, d time.Duration) bool {
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
	case <-done:
		return false
	}
}

// reset aborts the connection with a TCP RST so the client sees the cut.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// stream writes SSE events one by one, flushing each, and applies the fault.
type stream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	ctx context.Context
	h   *Handler
	rec *Request
	f   fault
	n   int  // events written
	end bool // the stream must stop: fault fired or client gone
}

// start writes the SSE response headers.
func (s *stream) start() {
	hd := s.w.Header()
	hd.Set("Content-Type", "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	_ = s.rc.Flush()
}

// event writes one raw event (its bytes must end with the blank line). After
// the stream has ended it does nothing.
func (s *stream) event(b []byte) {
	if s.end {
		return
	}
	switch s.n {
	case s.f.resetAfter:
		s.end = true
		reset(s.w)
		return
	case s.f.hangAfter:
		s.end = true
		s.hang()
		return
	case s.f.eofAfter:
		s.end = true
		return
	}
	if s.n > 0 && !wait(s.ctx, s.h.done, s.f.chunkDelay) {
		s.gone()
		return
	}
	if _, err := s.w.Write(b); err != nil {
		s.gone()
		return
	}
	if err := s.rc.Flush(); err != nil {
		s.gone()
		return
	}
	s.n++
}

// data writes "data: <json>\n\n".
func (s *stream) data(v any) {
	b := append(make([]byte, 0, 512), "data: "...)
	b = append(encode(b, v), "\n\n"...)
	s.event(b)
}

// named writes "event: <name>\ndata: <json>\n\n".
func (s *stream) named(name string, v any) {
	b := append(make([]byte, 0, 512), "event: "...)
	b = append(append(b, name...), "\ndata: "...)
	b = append(encode(b, v), "\n\n"...)
	s.event(b)
}

func (s *stream) hang() {
	select {
	case <-s.ctx.Done():
		s.h.canceled(s.rec)
	case <-s.h.done:
	}
}

func (s *stream) gone() {
	s.end = true
	if s.ctx.Err() != nil {
		s.h.canceled(s.rec)
	}
}
