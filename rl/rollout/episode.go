package rollout

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/client"
)

// Statuses of a Result, as the episode API names them.
const (
	StatusSuccess = "success"
	StatusFailure = "failure"
	StatusTimeout = "timeout"
	StatusError   = "error"
)

// Task is one task to run: where its files are and what it says.
type Task struct {
	ID       string            `json:"task_id"`
	Dir      string            `json:"dir,omitempty"`
	Prompt   string            `json:"prompt,omitempty"`
	Verifier string            `json:"verifier,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Metadata map[string]any    `json:"metadata,omitempty"`
}

// Result is the outcome of one episode (one line of `orchard run` and
// `orchard rollout` output).
type Result struct {
	TaskID       string  `json:"task_id"`
	GroupID      string  `json:"group_id,omitempty"`
	Sample       int     `json:"sample"`
	SandboxID    string  `json:"sandbox_id,omitempty"`
	EpisodeID    string  `json:"episode_id,omitempty"`
	Status       string  `json:"status"`
	Reward       float64 `json:"reward"`
	HarnessExit  int     `json:"harness_exit"`
	VerifierExit *int    `json:"verifier_exit,omitempty"`
	DurationMS   int64   `json:"duration_ms"`
	Error        string  `json:"error,omitempty"`
}

// Episode runs one harness attempt at t end to end: sandbox with episode,
// task files in, harness, verifier, outcome posted as the reward, sandbox
// deleted. Failures of the infrastructure come back as status "error"
// with Error set.
func (r *Runner) Episode(ctx context.Context, t Task, group string, sample int) Result {
	start := time.Now()
	res := Result{TaskID: t.ID, GroupID: group, Sample: sample, Status: StatusError}
	sb, err := r.o.Envd.Create(ctx, r.spec(t, group, sample))
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer sb.Close()
	res.SandboxID, res.EpisodeID = sb.ID(), sb.Info.EpisodeID
	outcome := r.execute(ctx, sb, t, &res)
	res.DurationMS = time.Since(start).Milliseconds()
	outcome.Info["duration_ms"] = res.DurationMS
	if _, err := sb.Finish(context.WithoutCancel(ctx), outcome); err != nil && res.Error == "" {
		res.Status, res.Error = StatusError, err.Error()
	}
	return res
}

// spec is the sandbox (and episode) of one attempt at t.
func (r *Runner) spec(t Task, group string, sample int) envd.Spec {
	env := map[string]string{"ORCHARD_TASK_ID": t.ID, "ORCHARD_TASK_PROMPT": t.Prompt}
	for k, v := range r.o.Env {
		env[k] = v
	}
	for k, v := range t.Env {
		env[k] = v
	}
	spec := envd.Spec{Image: r.o.Image, Workdir: r.o.Workdir, Network: r.o.Network, Env: env,
		TTL: envd.Duration(r.o.Timeout + r.o.VerifierTimeout + 5*time.Minute)}
	if !r.o.NoEpisode {
		md := map[string]any{"harness": r.o.Harness[0], "sample": sample}
		for k, v := range t.Metadata {
			md[k] = v
		}
		spec.Episode = &envd.EpisodeSpec{TaskID: t.ID, GroupID: group, Metadata: md}
	}
	return spec
}

// execute copies the task in, runs the harness and the verifier, fills
// res and returns the outcome to post.
func (r *Runner) execute(ctx context.Context, sb *client.Sandbox, t Task, res *Result) envd.Outcome {
	fail := func(err error) envd.Outcome {
		res.Status, res.Error = StatusError, err.Error()
		return envd.Outcome{Status: StatusError, Info: map[string]any{"error": err.Error()}}
	}
	if t.Dir != "" {
		if err := sb.UploadDir(ctx, t.Dir, r.o.Workdir); err != nil {
			return fail(err)
		}
	}
	hr, err := streamExec(ctx, sb, envd.ExecRequest{Cmd: r.argv(t), Timeout: envd.Duration(r.o.Timeout)}, r.o.Output)
	if err != nil {
		return fail(fmt.Errorf("harness: %w", err))
	}
	res.HarnessExit = hr.ExitCode
	info := map[string]any{"harness_exit": hr.ExitCode, "harness_timed_out": hr.TimedOut}
	if hr.TimedOut {
		res.Status, res.Reward = StatusTimeout, 0
		return envd.Outcome{Status: StatusTimeout, Info: info}
	}
	if err := r.verify(ctx, sb, t, hr, res, info); err != nil {
		return fail(fmt.Errorf("verifier: %w", err))
	}
	res.Status = StatusFailure
	if res.Reward > 0 {
		res.Status = StatusSuccess
	}
	return envd.Outcome{Reward: res.Reward, Status: res.Status, Info: info}
}

// argv is the harness command line for t.
func (r *Runner) argv(t Task) []string {
	rep := strings.NewReplacer("{prompt}", t.Prompt, "{task_id}", t.ID)
	argv := make([]string, len(r.o.Harness))
	for i, a := range r.o.Harness {
		argv[i] = rep.Replace(a)
	}
	return argv
}

// verify sets res.Reward: from the verifier (t's own, else the runner's),
// or from the harness exit code when there is none.
func (r *Runner) verify(ctx context.Context, sb *client.Sandbox, t Task, hr *envd.ExecResult, res *Result, info map[string]any) error {
	verifier := r.o.Verifier
	if t.Verifier != "" {
		verifier = t.Verifier
	}
	if verifier == "" {
		res.Reward = boolReward(hr.ExitCode == 0)
		return nil
	}
	vr, err := sb.Exec(ctx, envd.ExecRequest{Shell: verifier, Timeout: envd.Duration(r.o.VerifierTimeout)})
	if err != nil {
		return err
	}
	res.VerifierExit = &vr.ExitCode
	res.Reward = VerifierReward(vr)
	info["verifier_exit"], info["verifier_stdout"] = vr.ExitCode, tail(vr.Stdout, 2048)
	return nil
}

// streamExec runs req as a stream, copying output to out as it comes.
func streamExec(ctx context.Context, sb *client.Sandbox, req envd.ExecRequest, out io.Writer) (*envd.ExecResult, error) {
	st, err := sb.ExecStream(ctx, req)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	for {
		ev, err := st.Next()
		if err != nil {
			return nil, err
		}
		switch ev.Type {
		case envd.EventStdout, envd.EventStderr:
			_, _ = out.Write(ev.Bytes())
		case envd.EventEnd:
			return ev.Result, nil
		}
	}
}
