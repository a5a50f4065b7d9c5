package envd

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Spec is the body of POST /envd/v1/sandboxes.
type Spec struct {
	// Image is, for the local backend, an OCI image layout directory, a
	// `docker save` tarball or a root filesystem directory ("" means a
	// minimal read-only root built from the host's system directories); for
	// Kubernetes, a container image.
	Image string `json:"image,omitempty"`
	// Command is the image's entrypoint the sandbox agent starts beside
	// itself (Kubernetes only); empty means none.
	Command []string `json:"command,omitempty"`
	// Env is added to every exec; episode and exec env win over it.
	Env map[string]string `json:"env,omitempty"`
	// Workdir is the sandbox's writable directory and the default cwd;
	// default "/work".
	Workdir string `json:"workdir,omitempty"`
	// TTL is the sandbox's total lifetime from creation; 0 means the
	// server default. JSON accepts seconds or a Go duration string.
	TTL Duration `json:"ttl,omitempty"`
	// IdleTimeout reaps the sandbox after this long without requests; 0
	// means the server default.
	IdleTimeout Duration  `json:"idle_timeout,omitempty"`
	Resources   Resources `json:"resources,omitzero"`
	// Network is one of [NetworkProxy] (the default: loopback only, plus
	// the episode's model routes on the proxy), [NetworkNone] or
	// [NetworkHost]. "" means the server default.
	Network string `json:"network,omitempty"`
	// Episode, when set, makes envd open an episode on the proxy and
	// inject its credentials into every exec.
	Episode *EpisodeSpec `json:"episode,omitempty"`
	// Labels are copied to the sandbox (pod labels on Kubernetes).
	Labels map[string]string `json:"labels,omitempty"`
	// Egress is set by the [Manager] (never from JSON) for network mode
	// proxy when the sandbox has an episode: how it reaches the model.
	Egress *Egress `json:"-"`
}

// Network modes of a sandbox.
const (
	// NetworkProxy gives the sandbox its own network namespace with
	// loopback only; the proxy's model routes of its own episode are
	// reachable at the base URLs in its env, bridged by envd (local) or
	// allowed by a NetworkPolicy (Kubernetes). Nothing else is.
	NetworkProxy = "proxy"
	// NetworkNone gives the sandbox loopback only.
	NetworkNone = "none"
	// NetworkHost shares the host's network (local) or the cluster's
	// (Kubernetes): everything the host reaches, the sandbox reaches.
	NetworkHost = "host"
)

// Resources are per-sandbox limits. CPU is in cores ("0.5", "500m"),
// Memory and Disk in bytes with an optional suffix ("512Mi", "1G"), PIDs
// a count. Disk bounds the work dir (and /tmp). Zero values take the
// backend's defaults (documented in docs/envd.md).
type Resources struct {
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
	PIDs   int64  `json:"pids,omitempty"`
	Disk   string `json:"disk,omitempty"`
}

// EpisodeSpec names the task of the episode envd opens on the proxy.
type EpisodeSpec struct {
	TaskID   string         `json:"task_id"`
	GroupID  string         `json:"group_id,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Sandbox describes one sandbox, as returned by create, get and list.
type Sandbox struct {
	ID        string            `json:"id"`
	EpisodeID string            `json:"episode_id,omitempty"`
	Backend   string            `json:"backend"`
	Image     string            `json:"image,omitempty"`
	Workdir   string            `json:"workdir"`
	Network   string            `json:"network"`
	Labels    map[string]string `json:"labels,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	LastUsed  time.Time         `json:"last_used"`
	// Warnings lists limits that could not be enforced (for example no
	// writable cgroup hierarchy).
	Warnings []string `json:"warnings,omitempty"`
}

// Outcome is the optional body of DELETE /envd/v1/sandboxes/{id}: it
// finishes the sandbox's episode.
type Outcome struct {
	Reward float64        `json:"reward"`
	Status string         `json:"status"`
	Info   map[string]any `json:"info,omitempty"`
}

// ExecRequest is the body of POST .../{id}/exec. Exactly one of Cmd and
// Shell is set; Shell runs under "/bin/sh -c".
type ExecRequest struct {
	Cmd   []string          `json:"cmd,omitempty"`
	Shell string            `json:"shell,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	Cwd   string            `json:"cwd,omitempty"`
	// Stdin is written to the command and then closed; when nil the
	// command's stdin is /dev/null.
	Stdin *string `json:"stdin,omitempty"`
	// Timeout kills the command's whole process group; 0 means the
	// server default.
	Timeout Duration `json:"timeout,omitempty"`
	// Stream asks for an event stream (text/event-stream) instead of one
	// JSON result; an Accept: text/event-stream header does the same.
	Stream bool `json:"stream,omitempty"`
}

// ExecResult is the answer to a non-streaming exec and the data of the
// "end" event (without the output fields).
type ExecResult struct {
	ExecID   string `json:"exec_id"`
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// StdoutB64 and StderrB64 hold the exact bytes, base64, when the
	// output is not valid UTF-8 (Stdout and Stderr then lose bytes).
	StdoutB64  []byte  `json:"stdout_b64,omitempty"`
	StderrB64  []byte  `json:"stderr_b64,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	TimedOut   bool    `json:"timed_out,omitempty"`
	// Truncated reports that output beyond the server's cap was dropped.
	Truncated bool `json:"truncated,omitempty"`
	// Error is set when the command could not be started or was killed
	// for a reason other than its timeout.
	Error string `json:"error,omitempty"`
	// Running is set by GET .../exec/{exec_id} while the command runs;
	// the other fields are then empty.
	Running bool `json:"running,omitempty"`
}

// StdoutBytes returns the exact stdout bytes.
func (r *ExecResult) StdoutBytes() []byte {
	if r.StdoutB64 != nil {
		return r.StdoutB64
	}
	return []byte(r.Stdout)
}

// StderrBytes returns the exact stderr bytes.
func (r *ExecResult) StderrBytes() []byte {
	if r.StderrB64 != nil {
		return r.StderrB64
	}
	return []byte(r.Stderr)
}

// Event types of an exec stream, in the SSE "event:" field.
const (
	EventStart     = "start"
	EventStdout    = "stdout"
	EventStderr    = "stderr"
	EventKeepalive = "keepalive"
	EventEnd       = "end"
)

// Event is one event of an exec stream. Seq numbers the stored events of
// one exec from 1 (keepalives have 0) and is the SSE id, so a client
// reattaches with ?after=Seq. Output is in Data when it is valid UTF-8,
// else base64 in DataB64.
type Event struct {
	Type    string      `json:"type"`
	Seq     int64       `json:"seq,omitempty"`
	ExecID  string      `json:"exec_id,omitempty"`
	PID     int         `json:"pid,omitempty"`
	Data    string      `json:"data,omitempty"`
	DataB64 []byte      `json:"data_b64,omitempty"`
	Result  *ExecResult `json:"result,omitempty"`
}

// Bytes returns the output an stdout/stderr event carries.
func (e Event) Bytes() []byte {
	if e.DataB64 != nil {
		return e.DataB64
	}
	return []byte(e.Data)
}

// Duration is a time.Duration that reads JSON seconds (30, 0.5) or a Go
// duration string ("30s", "1h") and writes a string.
type Duration time.Duration

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts a number of seconds or a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			if f, ferr := strconv.ParseFloat(s, 64); ferr == nil {
				*d = Duration(f * float64(time.Second))
				return nil
			}
			return fmt.Errorf("duration %q: want seconds or a Go duration like \"30s\"", s)
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("duration %s: want seconds or a Go duration like \"30s\"", b)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
