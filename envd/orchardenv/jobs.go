package orchardenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// JobStatus is a job's state: queued -> running -> succeeded | failed.
type JobStatus string

// The job states of Orchard's JobStatus.
const (
	JobQueued    JobStatus = "queued"
	JobRunning   JobStatus = "running"
	JobSucceeded JobStatus = "succeeded"
	JobFailed    JobStatus = "failed"
)

// timedOutExit is the exit code of a command killed by its timeout, as
// Orchard's agent reports it (the coreutils timeout convention).
const timedOutExit = 124

// waitSlack is what a wait=true exec waits beyond the command's timeout
// before it answers with the job still running, as Orchard does.
const waitSlack = 30 * time.Second

// job is one command run in the background.
type job struct {
	id, sandboxID, command string
	created                time.Time
	done                   chan struct{} // closed when finished

	mu                  sync.Mutex // guards following
	status              JobStatus
	started, completed  time.Time
	stdout, stderr, err string
	exitCode            *int
}

// execReq is the body of POST /sandboxes/{id}/exec (Orchard ExecRequest).
type execReq struct {
	Command        json.RawMessage   `json:"command"`
	TimeoutSeconds *float64          `json:"timeout_seconds"`
	Cwd            string            `json:"cwd"`
	Env            map[string]string `json:"env"`
	LoginShell     bool              `json:"login_shell"`
	Wait           bool              `json:"wait"`
}

// commandText reads "command": a string, or a list joined with spaces
// (Orchard runs both through bash -c).
func commandText(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil && s != "" {
		return s, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil && len(list) > 0 {
		return strings.Join(list, " "), nil
	}
	if len(raw) == 0 || string(raw) == "null" || string(raw) == `""` || string(raw) == "[]" {
		return "", envd.Errorf(envd.ErrBadRequest, `field "command" is required`)
	}
	return "", envd.Errorf(envd.ErrBadRequest, `field "command": want a string or a list of strings, got %s`, raw)
}

// shellArgv runs command under bash -c (bash --login -i with ~/.bashrc
// for login_shell, like Orchard's agent), or /bin/sh -c where the
// sandbox has no bash.
func shellArgv(command string, login bool) []string {
	if login {
		command = "if [ -f ~/.bashrc ]; then . ~/.bashrc; fi; " + command
		return []string{"/bin/sh", "-c", `command -v bash >/dev/null 2>&1 && exec bash --login -i -c "$1"; exec /bin/sh -lc "$1"`, "sh", command}
	}
	return []string{"/bin/sh", "-c", `command -v bash >/dev/null 2>&1 && exec bash -c "$1"; exec /bin/sh -c "$1"`, "sh", command}
}

func (h *Handler) exec(w http.ResponseWriter, r *http.Request) {
	var req execReq
	if err := decode(w, r, 64<<20, &req); err != nil {
		writeError(w, err)
		return
	}
	command, err := commandText(req.Command)
	if err != nil {
		writeError(w, err)
		return
	}
	timeout := seconds(req.TimeoutSeconds, h.opts.ExecTimeout)
	sb, info, err := h.lookup(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	er := envd.ExecRequest{Cmd: shellArgv(command, req.LoginShell), Env: req.Env, Cwd: req.Cwd, Timeout: envd.Duration(timeout)}
	j := h.submit(sb.id, info.ID, command, er)
	if !req.Wait {
		writeJSON(w, http.StatusOK, map[string]string{"job_id": j.id, "status": string(JobQueued)})
		return
	}
	h.await(r.Context(), j, timeout+waitSlack)
	writeJSON(w, http.StatusOK, j.view())
}

// submit registers a job and starts it.
func (h *Handler) submit(sandboxID, envdID, command string, er envd.ExecRequest) *job {
	j := &job{id: newJobID(), sandboxID: sandboxID, command: command, created: h.opts.Now(),
		done: make(chan struct{}), status: JobQueued}
	h.mu.Lock()
	h.jobs[j.id] = j
	h.mu.Unlock()
	h.wg.Add(1)
	go h.runJob(j, envdID, er)
	return j
}

// runJob runs one job's command to its end and records the result.
func (h *Handler) runJob(j *job, envdID string, er envd.ExecRequest) {
	defer h.wg.Done()
	j.mu.Lock()
	j.status, j.started = JobRunning, h.opts.Now()
	j.mu.Unlock()
	var res envd.ExecResult
	err := h.callJSON(h.ctx, envdID, "exec", er, &res)
	j.finish(h.opts.Now(), &res, err, er.Timeout.D())
	h.retire(j.id)
}

// finish records the command's outcome and wakes waiters.
func (j *job) finish(now time.Time, res *envd.ExecResult, err error, timeout time.Duration) {
	j.mu.Lock()
	defer j.mu.Unlock()
	defer close(j.done)
	j.completed = now
	switch {
	case err != nil:
		j.status, j.err = JobFailed, err.Error()
		return
	case res.Error != "":
		j.status, j.err = JobFailed, res.Error
	}
	code := res.ExitCode
	j.stdout, j.stderr = res.Stdout, res.Stderr
	if res.TimedOut {
		code = timedOutExit
		j.err = fmt.Sprintf("Command timed out after %gs", timeout.Seconds())
	}
	j.exitCode = &code
	if j.err == "" && code == 0 {
		j.status = JobSucceeded
	} else {
		j.status = JobFailed
	}
}

// retire keeps at most MaxJobs finished jobs, forgetting the oldest.
func (h *Handler) retire(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.finished = append(h.finished, id)
	for len(h.finished) > h.opts.MaxJobs {
		delete(h.jobs, h.finished[0])
		h.finished = h.finished[1:]
	}
}

// await blocks until j finishes, d passes or ctx ends, and reports
// whether j finished.
func (h *Handler) await(ctx context.Context, j *job, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-j.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// view is the Orchard JobResponse of j.
func (j *job) view() map[string]any {
	j.mu.Lock()
	defer j.mu.Unlock()
	v := map[string]any{"job_id": j.id, "sandbox_id": j.sandboxID, "command": j.command, "status": j.status,
		"stdout": j.stdout, "stderr": j.stderr, "exit_code": j.exitCode, "created_at": unixSeconds(j.created),
		"started_at": nil, "completed_at": nil, "error": nil}
	if !j.started.IsZero() {
		v["started_at"] = unixSeconds(j.started)
	}
	if !j.completed.IsZero() {
		v["completed_at"] = unixSeconds(j.completed)
	}
	if j.err != "" {
		v["error"] = j.err
	}
	return v
}

func (h *Handler) job(id string) (*job, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	j, ok := h.jobs[id]
	if !ok {
		return nil, notFound("Job %s not found", id)
	}
	return j, nil
}

func (h *Handler) getJob(w http.ResponseWriter, r *http.Request) {
	j, err := h.job(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, j.view())
}

// waitJob blocks until the job finishes or ?timeout= (default 300 s)
// passes; then it answers 408 with the job, still running.
func (h *Handler) waitJob(w http.ResponseWriter, r *http.Request) {
	d, err := queryTimeout(r, 300)
	if err != nil {
		writeError(w, err)
		return
	}
	j, err := h.job(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if !h.await(r.Context(), j, d) {
		status = http.StatusRequestTimeout
	}
	writeJSON(w, status, j.view())
}

// seconds converts an optional JSON number of seconds; absent or not
// positive means def.
func seconds(v *float64, def time.Duration) time.Duration {
	if v == nil || *v <= 0 {
		return def
	}
	return time.Duration(*v * float64(time.Second))
}

func newJobID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	s := hex.EncodeToString(b[:])
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}
