package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/embedded"
)

// runEpisodes reads the finished episodes of an adaptive run from the
// store, by episode id.
func runEpisodes(t *testing.T, data, run string) map[string]recorder.EpisodeSummary {
	t.Helper()
	st, err := embedded.OpenReadOnly(data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eps, _, err := st.ListEpisodes(context.Background(), recorder.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]recorder.EpisodeSummary{}
	for _, ep := range eps {
		if gjson.GetBytes(ep.Metadata, mdPlanRun).String() == run && ep.Status != recorder.StatusRunning {
			out[ep.ID] = ep
		}
	}
	return out
}

// TestRolloutAdaptiveResumes runs `orchard rollout --adaptive` with the
// embedded local envd on three tasks whose verifiers pass always, never
// on every second and on every third sample ($ORCHARD_SAMPLE), SIGKILLs it mid-run, and resumes it with the same
// run id: the resumed run reads the finished rollouts back from the store
// and runs only the rest, it stops at the budget, no (task, sample) runs
// twice, and the summary's counts are the store's.
func TestRolloutAdaptiveResumes(t *testing.T) {
	const budget, run = 20, "run-e2e"
	s := startRunStack(t, runE2EModel, &llmtest.Script{Turns: []llmtest.Turn{{Choice: llmtest.Choice{Content: llmtest.Pieces{"ok"}}}}})
	dir := t.TempDir()
	var lines bytes.Buffer
	for _, tk := range []task{
		{ID: "easy", Verifier: "echo 1"},
		{ID: "hard", Verifier: "echo 0"},
		{ID: "half", Verifier: `[ $((ORCHARD_SAMPLE % 2)) -eq 0 ] && echo 1 || echo 0`},
		{ID: "third", Verifier: `[ $((ORCHARD_SAMPLE % 3)) -eq 0 ] && echo 1 || echo 0`},
	} {
		_ = json.NewEncoder(&lines).Encode(tk)
	}
	tasksPath := filepath.Join(dir, "tasks.jsonl")
	if err := os.WriteFile(tasksPath, lines.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(state string) []string {
		return []string{"rollout", "--adaptive", "--budget", strconv.Itoa(budget), "--run", run, "--n", "2", "--n-max", "4",
			"--batch", "4", "--concurrency", "2", "--data", s.data, "--proxy", s.proxyURL, "--admin-token", s.admin,
			"--state-dir", state, "--tasks", tasksPath, "--timeout", "1m", "--verifier-timeout", "30s", "--", "sh", "-c", "true"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// Both runs share a state dir: the resumed run's envd sweeps what the
	// killed one left (jails, their dirs and cgroups), checked at the end.
	state := searchableTempDir(t)
	first := exec.CommandContext(ctx, os.Args[0], args(state)...)
	first.Env = append(os.Environ(), "ORCHARD_TEST_MAIN=1")
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	for len(runEpisodes(t, s.data, run)) < 5 {
		select {
		case err := <-exited:
			t.Fatalf("first run exited (%v) before 5 rollouts:\n%s", err, firstErr.Bytes())
		default:
		}
		if ctx.Err() != nil {
			_ = first.Process.Signal(syscall.SIGKILL)
			<-exited
			t.Fatalf("first run never finished 5 rollouts:\n%s", firstErr.Bytes())
		}
		waitABit()
	}
	_ = first.Process.Signal(syscall.SIGKILL)
	<-exited
	before := runEpisodes(t, s.data, run)
	if len(before) >= budget {
		t.Fatalf("first run finished all %d rollouts before the kill; nothing left to resume", len(before))
	}

	stdout, stderr, code := runOrchardProc(t, ctx, args(state)...)
	if code != 0 {
		t.Fatalf("resumed rollout exit %d\nstderr:\n%s", code, stderr)
	}
	if want := fmt.Sprintf("adaptive run %s: %d finished rollouts in the store\n", run, len(before)); !bytes.HasPrefix(stderr, []byte(want)) {
		t.Errorf("resumed run stderr does not start with %q:\n%s", want, stderr)
	}
	after := runEpisodes(t, s.data, run)
	if len(after) != budget {
		t.Errorf("store holds %d finished rollouts of the run, want the budget %d", len(after), budget)
	}
	seen := map[string]string{}
	status := map[string]int{}
	for id, ep := range after {
		key := ep.TaskID + "/" + gjson.GetBytes(ep.Metadata, "sample").Raw
		if other, dup := seen[key]; dup {
			t.Errorf("rollout %s ran twice: episodes %s and %s", key, other, id)
		}
		seen[key] = id
		status[ep.Status]++
		sample := gjson.GetBytes(ep.Metadata, "sample").Int()
		want := map[string]float64{"easy": 1, "hard": 0, "half": b2f(sample%2 == 0), "third": b2f(sample%3 == 0)}[ep.TaskID]
		if ep.Reward == nil || *ep.Reward != want {
			t.Errorf("episode %s of %s: reward %v, want %v", id, ep.TaskID, ep.Reward, want)
		}
	}
	for id := range before {
		if _, ok := after[id]; !ok {
			t.Errorf("episode %s finished before the kill is gone", id)
		}
	}
	if n := strings.Count(string(stdout), "\n"); n != budget-len(before) {
		t.Errorf("resumed run printed %d result lines, want %d (the rollouts it ran)", n, budget-len(before))
	}
	want := fmt.Sprintf("\n%d episodes: %d success, %d failure, %d timeout, %d error\n", budget,
		status["success"], status["failure"], status["timeout"], status["error"])
	if !bytes.Contains(stderr, []byte(want)) {
		t.Errorf("summary does not count the store's %q:\n%s", want, stderr)
	}
	if !regexp.MustCompile(`planner: \d+ groups from 20 rollouts`).Match(stderr) {
		t.Errorf("no planner metrics line for 20 rollouts:\n%s", stderr)
	}
	assertSandboxesGone(t, state)

	out, err := runCLI(t, "rollout", "plan", "--tasks", tasksPath, "--data", s.data, "--n", "2")
	if err != nil {
		t.Fatalf("rollout plan: %v\n%s", err, out)
	}
	obs := 0.0
	for _, ts := range gjson.Get(out, "tasks").Array() {
		obs += ts.Get("posterior.alpha").Float() + ts.Get("posterior.beta").Float() - 2
	}
	if int(obs) != budget-status["error"] || !gjson.Get(out, "strides").IsArray() {
		t.Errorf("rollout plan holds %v outcomes, want %d:\n%s", obs, budget-status["error"], out)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
