package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// handleExec starts a command. Without streaming it answers with the full
// [envd.ExecResult] once the command ends and kills it if the client goes
// away first; with streaming it sends events and the command outlives the
// connection, so the client can reattach by exec id.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	var req envd.ExecRequest
	if err := decodeJSON(w, r, s.opts.MaxBody, &req); err != nil {
		envd.WriteError(w, err)
		return
	}
	x, err := s.start(&req)
	if err != nil {
		envd.WriteError(w, err)
		return
	}
	if req.Stream || strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		s.stream(w, r, x, 0)
		return
	}
	select {
	case <-x.doneCh:
	case <-r.Context().Done():
		x.stop("client went away")
		return
	}
	res, _ := x.fullResult()
	writeJSON(w, http.StatusOK, res)
}

// handleExecGet answers with the exec's result, or running:true.
func (s *Server) handleExecGet(w http.ResponseWriter, r *http.Request) {
	x, err := s.lookup(r.PathValue("eid"))
	if err != nil {
		envd.WriteError(w, err)
		return
	}
	res, _ := x.fullResult()
	writeJSON(w, http.StatusOK, res)
}

// handleExecEvents reattaches to an exec's event stream after the event
// given by ?after= or the Last-Event-ID header.
func (s *Server) handleExecEvents(w http.ResponseWriter, r *http.Request) {
	x, err := s.lookup(r.PathValue("eid"))
	if err != nil {
		envd.WriteError(w, err)
		return
	}
	after := r.URL.Query().Get("after")
	if after == "" {
		after = r.Header.Get("Last-Event-ID")
	}
	var seq int64
	if after != "" {
		if seq, err = strconv.ParseInt(after, 10, 64); err != nil || seq < 0 {
			envd.WriteError(w, envd.Errorf(envd.ErrBadRequest, "after=%q: want a non-negative event sequence number", after))
			return
		}
	}
	s.stream(w, r, x, seq)
}

// handleExecKill kills a running exec's process tree.
func (s *Server) handleExecKill(w http.ResponseWriter, r *http.Request) {
	x, err := s.lookup(r.PathValue("eid"))
	if err != nil {
		envd.WriteError(w, err)
		return
	}
	x.stop("killed by request")
	writeJSON(w, http.StatusOK, map[string]string{"exec_id": x.id})
}

// stream writes x's events after seq as server-sent events until the end
// event, sending keepalives while the command is quiet.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, x *execution, seq int64) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Exec-Id", x.id)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	keep := time.NewTicker(s.opts.Keepalive)
	defer keep.Stop()
	for {
		evs, done, more := x.since(seq)
		for _, ev := range evs {
			if err := writeEvent(w, ev); err != nil {
				return
			}
			seq = ev.Seq
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if done && len(evs) == 0 || len(evs) > 0 && evs[len(evs)-1].Type == envd.EventEnd {
			return
		}
		select {
		case <-more:
		case <-keep.C:
			if writeEvent(w, envd.Event{Type: envd.EventKeepalive, ExecID: x.id}) != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// writeEvent writes ev as one SSE event; stored events carry their
// sequence number as the SSE id.
func writeEvent(w http.ResponseWriter, ev envd.Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if ev.Seq > 0 {
		_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, b)
	} else {
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, b)
	}
	return err
}
