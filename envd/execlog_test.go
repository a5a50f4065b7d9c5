package envd_test

import (
	"testing"

	"github.com/orchard-rl/orchard/envd"
)

// TestExecLog checks sequence numbers, the output cap, reading after a
// sequence number and the joined result.
func TestExecLog(t *testing.T) {
	l := envd.NewExecLog("x-1", 5)
	if res, ok := l.Result(); ok || !res.Running || res.ExecID != "x-1" {
		t.Errorf("running: Result() = %+v, %v; want running", res, ok)
	}
	l.Append(envd.Event{Type: envd.EventStart, PID: 7})
	l.Output(envd.EventStdout, []byte("ab\xff"))
	l.Output(envd.EventStderr, []byte("cdef")) // 2 bytes over the cap
	l.Output(envd.EventStdout, []byte("g"))    // dropped whole
	_, _, more := l.Since(0)
	l.Finish(envd.ExecResult{ExitCode: 1})
	select {
	case <-more:
	default:
		t.Error("Finish did not wake a reader")
	}
	evs, done, _ := l.Since(2)
	if !done || len(evs) != 2 || evs[0].Seq != 3 || evs[0].Data != "cd" || evs[1].Type != envd.EventEnd || evs[1].ExecID != "x-1" {
		t.Errorf("Since(2) = %+v, %v", evs, done)
	}
	if evs, _, _ := l.Since(99); len(evs) != 0 {
		t.Errorf("Since(99) = %+v, want none", evs)
	}
	res, ok := l.Result()
	if !ok || res.ExitCode != 1 || !res.Truncated || string(res.StdoutBytes()) != "ab\xff" || res.StdoutB64 == nil ||
		res.Stderr != "cd" || res.StderrB64 != nil || res.ExecID != "x-1" {
		t.Errorf("Result() = %+v, %v", res, ok)
	}
}
