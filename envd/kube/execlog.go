package kube

import (
	"cmp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/orchard-rl/orchard/envd"
)

// Limits of an exec run through the API server, the agent's defaults.
const (
	maxExecOutput = 16 << 20 // stored stdout+stderr bytes
	maxHeldStderr = 64 << 10 // wrapper stderr kept before the command starts
)

// execLog is the event log of one exec run through the API server, in the
// agent's event format, so that envd's clients see no difference. It is
// safe for concurrent use: remotecommand writes stdout and stderr from
// their own goroutines.
type execLog struct {
	id      string
	argv0   string
	started time.Time

	mu        sync.Mutex // guards following
	events    []envd.Event
	held      []byte // stderr before the command started: the wrapper's
	outBytes  int64
	truncated bool
	pidv      int  // the command's PID, once running
	running   bool // the wrapper printed its PID
	done      bool
	notify    chan struct{} // closed and replaced on every append
}

func newExecLog(id, argv0 string) *execLog {
	return &execLog{id: id, argv0: argv0, started: time.Now(), notify: make(chan struct{})}
}

// appendLocked stores ev with the next sequence number and wakes readers.
func (x *execLog) appendLocked(ev envd.Event) {
	ev.Seq = int64(len(x.events)) + 1
	ev.ExecID = x.id
	x.events = append(x.events, ev)
	close(x.notify)
	x.notify = make(chan struct{})
}

// start records that the command runs as pid: the start event comes
// first, then the stderr that arrived before it.
func (x *execLog) start(pid int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.running || x.done {
		return
	}
	x.running, x.pidv = true, pid
	x.appendLocked(envd.Event{Type: envd.EventStart, PID: pid})
	x.outputLocked(envd.EventStderr, x.held)
	x.held = nil
}

// pid returns the command's PID, or 0 before it started.
func (x *execLog) pid() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.pidv
}

// output stores one chunk of stdout or stderr. Stderr before the start is
// held back: it is the wrapper's, not the command's.
func (x *execLog) output(typ string, p []byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case x.done:
	case !x.running && typ == envd.EventStderr:
		x.held = append(x.held, p[:min(len(p), maxHeldStderr-len(x.held))]...)
	default:
		x.outputLocked(typ, p)
	}
}

// outputLocked stores p, dropping what exceeds the output cap and
// remembering that it did.
func (x *execLog) outputLocked(typ string, p []byte) {
	if room := maxExecOutput - x.outBytes; int64(len(p)) > room {
		x.truncated = true
		p = p[:max(room, 0)]
	}
	if len(p) == 0 {
		return
	}
	x.outBytes += int64(len(p))
	ev := envd.Event{Type: typ}
	if utf8.Valid(p) {
		ev.Data = string(p)
	} else {
		ev.DataB64 = append([]byte(nil), p...)
	}
	x.appendLocked(ev)
}

// finish records the result and appends the end event. A command that
// never started gets a start event first and, unless it timed out, exit
// code 127 with why it could not start (the agent's contract).
func (x *execLog) finish(res envd.ExecResult) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done {
		return
	}
	if !x.running {
		x.appendLocked(envd.Event{Type: envd.EventStart})
		why := strings.TrimSpace(string(x.held))
		if why == "" {
			why = cmp.Or(res.Error, "the exec wrapper printed no PID")
		}
		res.Error = "start " + x.argv0 + ": " + why
		if !res.TimedOut {
			res.ExitCode = 127
		}
	}
	res.ExecID, res.Truncated = x.id, x.truncated
	res.DurationMS = float64(time.Since(x.started).Microseconds()) / 1000
	x.done = true
	x.appendLocked(envd.Event{Type: envd.EventEnd, Result: &res})
}

// since returns the stored events after seq and a channel closed on the
// next append.
func (x *execLog) since(seq int64) ([]envd.Event, <-chan struct{}) {
	x.mu.Lock()
	defer x.mu.Unlock()
	seq = min(max(seq, 0), int64(len(x.events)))
	return x.events[seq:], x.notify
}

// result returns the end result with stdout and stderr joined from the
// events; call it after finish.
func (x *execLog) result() envd.ExecResult {
	x.mu.Lock()
	defer x.mu.Unlock()
	var res envd.ExecResult
	var out, errb strings.Builder
	for _, ev := range x.events {
		switch ev.Type {
		case envd.EventStdout:
			out.Write(ev.Bytes())
		case envd.EventStderr:
			errb.Write(ev.Bytes())
		case envd.EventEnd:
			res = *ev.Result
		}
	}
	res.Stdout, res.Stderr = out.String(), errb.String()
	if !utf8.ValidString(res.Stdout) {
		res.StdoutB64 = []byte(res.Stdout)
	}
	if !utf8.ValidString(res.Stderr) {
		res.StderrB64 = []byte(res.Stderr)
	}
	return res
}
