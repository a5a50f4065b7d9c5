package kube

import (
	"cmp"
	"strings"
	"sync"
	"time"

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

	mu      sync.Mutex // guards following, and the log's contents
	log     *envd.ExecLog
	held    []byte // stderr before the command started: the wrapper's
	pidv    int    // the command's PID, once running
	running bool   // the wrapper printed its PID
}

func newExecLog(id, argv0 string) *execLog {
	return &execLog{id: id, argv0: argv0, started: time.Now(), log: envd.NewExecLog(id, maxExecOutput)}
}

// start records that the command runs as pid: the start event comes
// first, then the stderr that arrived before it.
func (x *execLog) start(pid int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.running || x.log.Done() {
		return
	}
	x.running, x.pidv = true, pid
	x.log.Append(envd.Event{Type: envd.EventStart, PID: pid})
	x.log.Output(envd.EventStderr, x.held)
	x.held = nil
}

// pid returns the command's PID, or 0 before it started.
func (x *execLog) pid() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.pidv
}

// output stores one chunk of stdout or stderr, up to the output cap.
// Stderr before the start is held back: it is the wrapper's, not the
// command's.
func (x *execLog) output(typ string, p []byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case x.log.Done():
	case !x.running && typ == envd.EventStderr:
		x.held = append(x.held, p[:min(len(p), maxHeldStderr-len(x.held))]...)
	default:
		x.log.Output(typ, p)
	}
}

// finish records the result and appends the end event. A command that
// never started gets a start event first and, unless it timed out, exit
// code 127 with why it could not start (the agent's contract).
func (x *execLog) finish(res envd.ExecResult) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.log.Done() {
		return
	}
	if !x.running {
		x.log.Append(envd.Event{Type: envd.EventStart})
		why := strings.TrimSpace(string(x.held))
		if why == "" {
			why = cmp.Or(res.Error, "the exec wrapper printed no PID")
		}
		res.Error = "start " + x.argv0 + ": " + why
		if !res.TimedOut {
			res.ExitCode = 127
		}
	}
	res.DurationMS = float64(time.Since(x.started).Microseconds()) / 1000
	x.log.Finish(res)
}

// since returns the stored events after seq and a channel closed on the
// next append.
func (x *execLog) since(seq int64) ([]envd.Event, <-chan struct{}) {
	x.mu.Lock()
	defer x.mu.Unlock()
	evs, _, more := x.log.Since(seq)
	return evs, more
}

// result returns the end result with stdout and stderr joined from the
// events; call it after finish.
func (x *execLog) result() envd.ExecResult {
	x.mu.Lock()
	defer x.mu.Unlock()
	res, _ := x.log.Result()
	return res
}
