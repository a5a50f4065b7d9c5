package loadgen

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat; it
// is 100 on every Linux architecture Go supports.
const clockTicks = 100

// readProc reads a process's CPU time (user + system, all threads, and the
// system part), its
// peak and current resident set size, and its read and write system calls
// from /proc.
func readProc(pid int) (ProcStat, error) {
	var st ProcStat
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, fmt.Errorf("read process stats: %w", err)
	}
	// Fields after the command name, which may hold spaces: state is
	// field 3, utime 14 and stime 15.
	i := bytes.LastIndexByte(stat, ')')
	f := bytes.Fields(stat[i+1:])
	if i < 0 || len(f) < 13 {
		return st, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stt, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return st, fmt.Errorf("parse /proc/%d/stat cpu times", pid)
	}
	st.CPU = time.Duration(ut+stt) * time.Second / clockTicks
	st.Sys = time.Duration(stt) * time.Second / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, fmt.Errorf("read process status: %w", err)
	}
	st.PeakRSS = statusKB(status, "VmHWM:")
	st.RSS = statusKB(status, "VmRSS:")
	st.Anon = statusKB(status, "RssAnon:")
	// Some sandboxes hide /proc/PID/io: the counts stay 0 there, and the
	// report leaves them out.
	if io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		st.Reads, st.Writes = ioCount(io, "syscr:"), ioCount(io, "syscw:")
	}
	return st, nil
}

// ioCount returns a "key: N" line of /proc/PID/io, or 0.
func ioCount(io []byte, key string) int64 {
	for line := range bytes.Lines(io) {
		if v, ok := bytes.CutPrefix(line, []byte(key)); ok {
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}

// loadAvg returns the 1-minute load average, or -1.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(string(f[0]), 64)
	if err != nil {
		return -1
	}
	return v
}
