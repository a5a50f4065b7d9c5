package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// agentRetry is how long execs skip an agent that could not be dialled
// before they try it again; a dial to an unroutable pod IP costs up to the
// dial timeout.
const agentRetry = 30 * time.Second

// sseKeepalive is the agent's keepalive interval on quiet exec streams.
const sseKeepalive = 15 * time.Second

// podTransport carries envd's requests to one sandbox: everything to its
// agent on the pod IP, and execs through the API server's pods/exec when
// ExecVia is apiserver, or auto and the agent cannot be dialled. It is
// safe for concurrent use.
type podTransport struct {
	b       *Backend
	pod     string
	workdir string

	mu        sync.Mutex // guards following
	downUntil time.Time  // until then auto mode skips the agent
}

func (b *Backend) podTransport(pod, workdir string, agentUp bool) *podTransport {
	t := &podTransport{b: b, pod: pod, workdir: workdir}
	if !agentUp {
		t.downUntil = time.Now().Add(agentRetry)
	}
	return t
}

// unreachable reports whether err is a failure to connect (refused, timed
// out, no route): the request never reached the agent, so sending it
// another way cannot run a command twice.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// RoundTrip implements http.RoundTripper.
func (t *podTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/agent/v1/exec" {
		return t.b.opts.Transport.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read exec request: %w", err)
	}
	if t.b.opts.ExecVia == ExecViaAuto && t.agentMaybeUp() {
		out := r.Clone(r.Context())
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		out.Body, _ = out.GetBody()
		res, err := t.b.opts.Transport.RoundTrip(out)
		if err == nil || !unreachable(err) {
			return res, err
		}
		t.mu.Lock()
		t.downUntil = time.Now().Add(agentRetry)
		t.mu.Unlock()
		t.b.opts.Logger.Info("sandbox agent unreachable; exec goes through the API server", "pod", t.pod, "err", err)
	}
	return t.apiExec(r, body), nil
}

// agentMaybeUp reports whether auto mode should try the agent first.
func (t *podTransport) agentMaybeUp() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Now().After(t.downUntil)
}

// apiExec answers an agent exec request by running it through the API
// server: one JSON result, or an event stream. A streamed command ends
// when its stream is closed (it cannot be reattached).
func (t *podTransport) apiExec(r *http.Request, body []byte) *http.Response {
	var req envd.ExecRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return errorResponse(r, envd.Errorf(envd.ErrBadRequest, "decode JSON body: %v", err))
	}
	argv, err := execArgv(t.workdir, &req)
	if err != nil {
		return errorResponse(r, err)
	}
	x := newExecLog("x-"+randomHex(8), cmdOf(&req)[0])
	if !req.Stream && !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		t.runExec(r.Context(), &req, argv, x)
		return jsonResponse(r, http.StatusOK, x.result())
	}
	ctx, cancel := context.WithCancel(r.Context())
	s := &sseBody{x: x, cancel: cancel, done: make(chan struct{})}
	go s.run(ctx, t, &req, argv)
	h := http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache"}, "X-Exec-Id": {x.id}}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: s, ContentLength: -1, Request: r}
}

// cmdOf returns the argv req runs.
func cmdOf(req *envd.ExecRequest) []string {
	if req.Shell != "" {
		return []string{"/bin/sh", "-c", req.Shell}
	}
	return req.Cmd
}

// sseBody is the body of a streamed exec: the log's events as server-sent
// events, exactly as the agent writes them. It owns the goroutine that
// runs the exec; Close stops the exec and waits for it.
type sseBody struct {
	x      *execLog
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
	buf    bytes.Buffer
	seq    int64
	ended  bool
}

func (s *sseBody) run(ctx context.Context, t *podTransport, req *envd.ExecRequest, argv []string) {
	defer close(s.done)
	t.runExec(ctx, req, argv, s.x)
}

// Read returns the next events, waiting for them and writing a keepalive
// after sseKeepalive of silence.
func (s *sseBody) Read(p []byte) (int, error) {
	for s.buf.Len() == 0 {
		if s.ended {
			return 0, io.EOF
		}
		evs, more := s.x.since(s.seq)
		for _, ev := range evs {
			writeEvent(&s.buf, ev)
			s.seq, s.ended = ev.Seq, ev.Type == envd.EventEnd
		}
		if len(evs) > 0 {
			continue
		}
		t := time.NewTimer(sseKeepalive)
		select {
		case <-more:
		case <-t.C:
			writeEvent(&s.buf, envd.Event{Type: envd.EventKeepalive, ExecID: s.x.id})
		}
		t.Stop()
	}
	return s.buf.Read(p)
}

// Close stops the exec (killing the command if it still runs) and waits
// until it has ended.
func (s *sseBody) Close() error {
	s.cancel()
	<-s.done
	return nil
}

// writeEvent writes ev as one SSE event; stored events carry their
// sequence number as the SSE id.
func writeEvent(w *bytes.Buffer, ev envd.Event) {
	b, _ := json.Marshal(ev) // an Event always marshals
	if ev.Seq > 0 {
		fmt.Fprintf(w, "id: %d\n", ev.Seq)
	}
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, b)
}

// jsonResponse is an agent-like JSON answer to r.
func jsonResponse(r *http.Request, status int, v any) *http.Response {
	b, _ := json.Marshal(v) // results and errors always marshal
	b = append(b, '\n')
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: r}
}

// errorResponse is the agent's error answer for err.
func errorResponse(r *http.Request, err error) *http.Response {
	status, typ := envd.StatusFor(err)
	return jsonResponse(r, status, map[string]*envd.Error{"error": {Type: typ, Message: err.Error()}})
}
