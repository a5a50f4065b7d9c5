package envd

import (
	"strings"
	"unicode/utf8"
)

// ExecLog is the stored event log of one exec, kept so that clients can
// stream it and reattach by sequence number: it numbers the events, caps
// the stored output, and joins the result from the events.
//
// It is not safe for concurrent use: its owner guards it with its own
// mutex, which lets the owner append several events at once (the agent
// holds it while it starts the process, so that the start event comes
// before any output).
type ExecLog struct {
	id        string
	maxBytes  int64
	events    []Event
	outBytes  int64
	truncated bool
	done      bool
	result    ExecResult
	notify    chan struct{} // closed and replaced on every append
}

// NewExecLog returns the empty log of exec id, which stores at most
// maxBytes of stdout and stderr together.
func NewExecLog(id string, maxBytes int64) *ExecLog {
	return &ExecLog{id: id, maxBytes: maxBytes, notify: make(chan struct{})}
}

// Append stores ev with the next sequence number and the exec id, and
// wakes readers.
func (l *ExecLog) Append(ev Event) {
	ev.Seq = int64(len(l.events)) + 1
	ev.ExecID = l.id
	l.events = append(l.events, ev)
	close(l.notify)
	l.notify = make(chan struct{})
}

// Output stores one chunk of stdout or stderr (typ is EventStdout or
// EventStderr), dropping what exceeds the output cap and remembering that
// it did.
func (l *ExecLog) Output(typ string, p []byte) {
	if room := l.maxBytes - l.outBytes; int64(len(p)) > room {
		l.truncated = true
		p = p[:max(room, 0)]
	}
	if len(p) == 0 {
		return
	}
	l.outBytes += int64(len(p))
	ev := Event{Type: typ}
	if utf8.Valid(p) {
		ev.Data = string(p)
	} else {
		ev.DataB64 = append([]byte(nil), p...)
	}
	l.Append(ev)
}

// Finish records res, with the exec id and whether output was truncated,
// and appends the end event that carries it.
func (l *ExecLog) Finish(res ExecResult) {
	res.ExecID, res.Truncated = l.id, l.truncated
	l.result, l.done = res, true
	l.Append(Event{Type: EventEnd, Result: &res})
}

// Done reports whether Finish was called.
func (l *ExecLog) Done() bool { return l.done }

// Since returns the stored events after seq, whether the exec has ended,
// and a channel closed on the next append. The events are shared: do not
// modify them.
func (l *ExecLog) Since(seq int64) ([]Event, bool, <-chan struct{}) {
	seq = min(max(seq, 0), int64(len(l.events)))
	return l.events[seq:], l.done, l.notify
}

// Result returns the result with stdout and stderr joined from the
// events; ok is false, and the result only says Running, until Finish.
func (l *ExecLog) Result() (res ExecResult, ok bool) {
	if !l.done {
		return ExecResult{ExecID: l.id, Running: true}, false
	}
	var out ExecOutput
	for _, ev := range l.events {
		out.Add(ev)
	}
	res = l.result
	res.Stdout, res.Stderr = out.Strings()
	if !utf8.ValidString(res.Stdout) {
		res.StdoutB64 = []byte(res.Stdout)
	}
	if !utf8.ValidString(res.Stderr) {
		res.StderrB64 = []byte(res.Stderr)
	}
	return res, true
}

// ExecOutput collects the stdout and stderr that an exec's events carry.
// The zero value is empty and ready to use.
type ExecOutput struct {
	stdout, stderr strings.Builder
}

// Add appends the output ev carries; events of other types add nothing.
func (o *ExecOutput) Add(ev Event) {
	switch ev.Type {
	case EventStdout:
		o.stdout.Write(ev.Bytes())
	case EventStderr:
		o.stderr.Write(ev.Bytes())
	}
}

// Strings returns the stdout and stderr collected so far, exact bytes
// (not necessarily valid UTF-8).
func (o *ExecOutput) Strings() (stdout, stderr string) {
	return o.stdout.String(), o.stderr.String()
}
