package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// errStreamIdle is the cancel cause when a stream is silent too long.
var errStreamIdle = errors.New("exec stream idle too long")

// Stream reads the events of one exec. Next returns io.EOF after the end
// event. If the connection breaks, Next reattaches by exec id from the
// last event seen, so no event is lost or repeated. Close releases it; the
// command keeps running unless killed.
type Stream struct {
	sb     *Sandbox
	ctx    context.Context
	execID string
	seq    int64 // last stored event delivered
	ended  bool

	mu     sync.Mutex // guards following
	body   io.ReadCloser
	sc     *bufio.Scanner
	rctx   context.Context // the current connection's; canceled when idle
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

// ExecStream starts a command and returns its event stream; the first
// event is "start" with the exec id.
func (s *Sandbox) ExecStream(ctx context.Context, req envd.ExecRequest) (*Stream, error) {
	req.Stream = true
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode exec: %w", err)
	}
	st := &Stream{sb: s, ctx: ctx}
	rq := request{method: http.MethodPost, path: s.path("/exec"), body: b, ctype: "application/json", accept: "text/event-stream"}
	if err := st.open(rq); err != nil {
		return nil, fmt.Errorf("exec stream in %s: %w", s.Info.ID, err)
	}
	return st, nil
}

// Attach reattaches to exec execID's events after sequence number after
// (0 replays from the start).
func (s *Sandbox) Attach(ctx context.Context, execID string, after int64) (*Stream, error) {
	st := &Stream{sb: s, ctx: ctx, execID: execID, seq: after}
	if err := st.open(st.attachRequest()); err != nil {
		return nil, fmt.Errorf("attach to %s in %s: %w", execID, s.Info.ID, err)
	}
	return st, nil
}

func (st *Stream) attachRequest() request {
	p := st.sb.path("/exec/" + url.PathEscape(st.execID) + "/events?after=" + strconv.FormatInt(st.seq, 10))
	return request{method: http.MethodGet, path: p, accept: "text/event-stream"}
}

// open sends rq with a context that the idle timer cancels.
func (st *Stream) open(rq request) error {
	ctx, cancel := context.WithCancelCause(st.ctx)
	res, err := st.sb.c.do(ctx, rq)
	if err != nil {
		cancel(nil)
		return err
	}
	if id := res.Header.Get("X-Exec-Id"); id != "" {
		st.execID = id
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	st.mu.Lock()
	st.body, st.sc, st.rctx, st.cancel = res.Body, sc, ctx, cancel
	st.timer = time.AfterFunc(st.sb.c.opts.StreamIdle, func() { cancel(errStreamIdle) })
	st.mu.Unlock()
	return nil
}

// ExecID returns the id of the exec, known once the stream is open.
func (st *Stream) ExecID() string { return st.execID }

// Next returns the next event (keepalives included).
func (st *Stream) Next() (envd.Event, error) {
	if st.ended {
		return envd.Event{}, io.EOF
	}
	for attempt := 0; ; attempt++ {
		ev, err := st.read()
		if err == nil {
			if ev.Seq > 0 {
				st.seq = ev.Seq
			}
			if ev.Type == envd.EventEnd {
				st.ended = true
			}
			return ev, nil
		}
		if st.ctx.Err() != nil || errors.Is(err, errStreamIdle) || st.execID == "" || attempt >= st.sb.c.opts.Retries {
			return envd.Event{}, fmt.Errorf("read exec stream %s: %w", st.execID, err)
		}
		st.Close()
		if err := st.open(st.attachRequest()); err != nil {
			return envd.Event{}, fmt.Errorf("reattach exec stream %s: %w", st.execID, err)
		}
	}
}

// read parses one SSE event from the current connection.
func (st *Stream) read() (envd.Event, error) {
	st.mu.Lock()
	sc, timer, rctx := st.sc, st.timer, st.rctx
	st.mu.Unlock()
	var data string
	for sc.Scan() {
		timer.Reset(st.sb.c.opts.StreamIdle)
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = d
			continue
		}
		if line != "" || data == "" {
			continue
		}
		var ev envd.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return ev, fmt.Errorf("decode event: %w", err)
		}
		return ev, nil
	}
	err := sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF // the server closed before the end event
	}
	if errors.Is(context.Cause(rctx), errStreamIdle) {
		err = errStreamIdle
	}
	return envd.Event{}, err
}

// Wait reads the stream to its end and returns the result, with stdout
// and stderr collected from the events.
func (st *Stream) Wait() (*envd.ExecResult, error) {
	var out envd.ExecOutput
	for {
		ev, err := st.Next()
		if err != nil {
			return nil, err
		}
		out.Add(ev)
		if ev.Type == envd.EventEnd {
			res := *ev.Result
			res.Stdout, res.Stderr = out.Strings()
			return &res, nil
		}
	}
}

// Close releases the connection.
func (st *Stream) Close() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.timer != nil {
		st.timer.Stop()
	}
	if st.cancel != nil {
		st.cancel(nil)
	}
	if st.body != nil {
		return st.body.Close()
	}
	return nil
}
