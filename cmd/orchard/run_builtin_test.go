package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/recorder"
)

// runE2EModel is the scripted model of the `orchard run` and `rollout`
// tests.
const runE2EModel = "run-e2e"

// runE2EHarness is a minimal harness: it talks to the model only through
// the OPENAI_* env the episode injects, with curl from the host's /usr.
// call FILE posts FILE as a chat completion and prints the answer.
const runE2EHarness = `set -eu
call() {
	curl -sS -f -A orchard-run-e2e/1.0 -H "Authorization: Bearer $OPENAI_API_KEY" \
		-H 'Content-Type: application/json' --data-binary @"$1" "$OPENAI_BASE_URL/chat/completions"
}
call turn1.json > reply1.json
call turn2.json > reply2.json
sed 's/^/cgroup /' /proc/self/cgroup
base=${OPENAI_BASE_URL%%/e/*}
echo "admin API $(curl -s -o /dev/null -w '%{http_code}' -X POST "$base/orchard/v1/episodes/$ORCHARD_EPISODE_ID/finish" -d '{"reward":1,"status":"success"}')"
echo "upstream $(curl -s -o /dev/null -w '%{http_code}' "$UPSTREAM_URL" || true)"
echo "harness done in $(pwd) as task $ORCHARD_TASK_ID"
`

// TestRunBuiltinEnvd runs `orchard run` as its own process without
// --envd, so it starts its embedded envd with the local backend (real
// bubblewrap, the product's default agent path and options). The harness,
// copied in with --task-dir, makes two chat completion calls through the
// proxy with the episode's credentials; the verifier checks the answers
// and prints the reward. The episode must hold exactly those two calls,
// the reward and the status, and the sandbox must be gone afterwards.
func TestRunBuiltinEnvd(t *testing.T) {
	const (
		answer1 = "Paris is the capital."
		answer2 = "About 2.1 million people."
		reward  = 0.75
	)
	script := &llmtest.Script{Turns: []llmtest.Turn{
		{Choice: llmtest.Choice{Content: llmtest.Pieces{"Paris", " is the capital."}}},
		{Choice: llmtest.Choice{Content: llmtest.Pieces{"About 2.1 million", " people."}}},
	}}
	s := startRunStack(t, runE2EModel, script)
	turn1 := `{"model":"run-e2e","messages":[{"role":"user","content":"What is the capital of France?"}]}`
	turn2 := `{"model":"run-e2e","messages":[{"role":"user","content":"What is the capital of France?"},` +
		`{"role":"assistant","content":"` + answer1 + `"},{"role":"user","content":"How many people live there?"}]}`
	taskDir, state := t.TempDir(), searchableTempDir(t)
	writeFiles(t, taskDir, map[string]string{"harness.sh": runE2EHarness, "turn1.json": turn1, "turn2.json": turn2})

	hostView := watchHarnessCgroups(s)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stdout, stderr, code := runOrchardProc(t, ctx, "run",
		"--proxy", s.proxyURL, "--admin-token", s.admin, "--state-dir", state,
		"--task-id", "capital", "--group-id", "g-capital", "--task-dir", taskDir, "--env", "UPSTREAM_URL="+s.up.URL(),
		"--timeout", "1m", "--verifier-timeout", "30s",
		"--verifier", `grep -qF '`+answer1+`' reply1.json && grep -qF '`+answer2+`' reply2.json && echo 0.75`,
		"--", "sh", "harness.sh")
	if code != 0 {
		t.Fatalf("orchard run exit %d\nstdout: %s\nstderr:\n%s", code, stdout, stderr)
	}
	var res runResult
	if err := json.Unmarshal(stdout, &res); err != nil || bytes.Count(stdout, []byte("\n")) != 1 {
		t.Fatalf("orchard run stdout is not one result line: %v\n%s", err, stdout)
	}
	if res.TaskID != "capital" || res.GroupID != "g-capital" || res.Sample != 0 || res.Status != "success" ||
		res.Reward != reward || res.HarnessExit != 0 || res.VerifierExit == nil || *res.VerifierExit != 0 ||
		!strings.HasPrefix(res.SandboxID, "sb-") || !strings.HasPrefix(res.EpisodeID, "ep_") || res.Error != "" {
		t.Fatalf("run result %s\nstderr:\n%s", stdout, stderr)
	}
	// In the default network mode the harness reaches its own model routes
	// only: the proxy's admin API answers 403 from envd's gate, and the
	// upstream (a loopback port of the host) does not answer at all.
	if !bytes.Contains(stderr, []byte("admin API 403\nupstream 000\n")) {
		t.Errorf("other connections from the harness did not fail as they should:\n%s", stderr)
	}
	if !bytes.Contains(stderr, []byte("harness done in /work as task capital\n")) {
		t.Errorf("harness output missing from run's stderr:\n%s", stderr)
	}
	assertHarnessCgroup(t, res.SandboxID, hostView, stderr)
	ep := s.episode(t, res.EpisodeID, 2)
	if ep.ID != res.EpisodeID || ep.TaskID != "capital" || ep.GroupID != "g-capital" || ep.Calls != 2 ||
		ep.Status != recorder.StatusSuccess || ep.Reward == nil || *ep.Reward != reward {
		t.Errorf("episode: id %s task %q group %q calls %d status %q reward %v; want %s capital g-capital 2 success %v",
			ep.ID, ep.TaskID, ep.GroupID, ep.Calls, ep.Status, ep.Reward, res.EpisodeID, reward)
	}
	if got := gjson.GetBytes(ep.Metadata, "harness").String(); got != "sh" {
		t.Errorf("episode metadata %s: harness %q, want sh", ep.Metadata, got)
	}
	info := gjson.ParseBytes(ep.Info)
	if info.Get("harness_exit").Int() != 0 || info.Get("verifier_exit").Int() != 0 || info.Get("verifier_stdout").String() != "0.75\n" {
		t.Errorf("episode info %s: want harness_exit 0, verifier_exit 0, verifier_stdout \"0.75\\n\"", ep.Info)
	}

	calls := s.calls(t, res.EpisodeID)
	if len(calls) != 2 {
		t.Fatalf("episodes show: %d calls, want 2", len(calls))
	}
	wantReq, wantAns := []string{turn1, turn2}, []string{answer1, answer2}
	for i, c := range calls {
		if c.EpisodeID != res.EpisodeID || c.Seq != int64(i+1) || c.Status != 200 || c.Method != "POST" ||
			c.Path != "/e/"+res.EpisodeID+"/v1/chat/completions" || c.Model != runE2EModel || c.Stream ||
			c.Harness != "orchard-run-e2e/1.0" {
			t.Errorf("call %d: episode %s seq %d status %d %s %s model %q stream %v harness %q", i, c.EpisodeID, c.Seq,
				c.Status, c.Method, c.Path, c.Model, c.Stream, c.Harness)
		}
		if string(c.Request) != wantReq[i] {
			t.Errorf("call %d request:\n%s\nwant the harness's bytes:\n%s", i, c.Request, wantReq[i])
		}
		if got := gjson.GetBytes(c.Response, "choices.0.message.content").String(); got != wantAns[i] {
			t.Errorf("call %d answer %q, want %q", i, got, wantAns[i])
		}
	}
	if n := len(s.up.Requests()); n != 2 {
		t.Errorf("upstream saw %d requests, want 2", n)
	}
	assertSandboxesGone(t, state, res.SandboxID)
}

// TestRolloutBuiltinEnvd runs `orchard rollout` with the embedded envd on
// two tasks, two samples each: four sandboxes, four episodes with one call
// each, rewards from each task's own verifier, and the summary.
func TestRolloutBuiltinEnvd(t *testing.T) {
	const answer = "Paris is the capital."
	script := &llmtest.Script{Turns: []llmtest.Turn{{Choice: llmtest.Choice{Content: llmtest.Pieces{"Paris", " is the capital."}}}}}
	s := startRunStack(t, runE2EModel, script)
	dir, state := t.TempDir(), searchableTempDir(t)
	tasks := []task{
		{ID: "alpha", Prompt: "Capital of France?", Verifier: `grep -qF '` + answer + `' reply.json && echo 1`},
		{ID: "beta", Prompt: "Capital of Italy?", Verifier: `grep -qF 'Rome' reply.json && echo 1 || echo 0`},
	}
	var lines bytes.Buffer
	for _, tk := range tasks {
		_ = json.NewEncoder(&lines).Encode(tk)
	}
	tasksPath := filepath.Join(dir, "tasks.jsonl")
	if err := os.WriteFile(tasksPath, lines.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	harness := `curl -sS -f -A orchard-rollout-e2e/1.0 -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' ` +
		`--data-binary '{"model":"run-e2e","messages":[{"role":"user","content":"{prompt}"}]}' "$OPENAI_BASE_URL/chat/completions" > reply.json`

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stdout, stderr, code := runOrchardProc(t, ctx, "rollout",
		"--proxy", s.proxyURL, "--admin-token", s.admin, "--state-dir", state,
		"--tasks", tasksPath, "--n", "2", "--concurrency", "2", "--quiet",
		"--timeout", "1m", "--verifier-timeout", "30s",
		"--", "sh", "-c", harness)
	if code != 0 {
		t.Fatalf("orchard rollout exit %d\nstdout: %s\nstderr:\n%s", code, stdout, stderr)
	}
	wantSummary := "\n4 episodes: 2 success, 2 failure, 0 timeout, 0 error\n" +
		"  alpha                          mean reward 1.000 over 2\n" +
		"  beta                           mean reward 0.000 over 2\n"
	if !strings.HasSuffix(string(stderr), wantSummary) {
		t.Errorf("rollout stderr does not end with the summary %q:\n%s", wantSummary, stderr)
	}
	results := map[string][]runResult{}
	episodes, sandboxes := map[string]bool{}, []string{}
	for _, line := range strings.Split(strings.TrimSpace(string(stdout)), "\n") {
		var r runResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("result line %q: %v", line, err)
		}
		results[r.TaskID] = append(results[r.TaskID], r)
		episodes[r.EpisodeID] = true
		sandboxes = append(sandboxes, r.SandboxID)
	}
	if len(episodes) != 4 || len(results["alpha"]) != 2 || len(results["beta"]) != 2 {
		t.Fatalf("results: %d distinct episodes, alpha %d, beta %d; want 4, 2, 2\n%s", len(episodes), len(results["alpha"]), len(results["beta"]), stdout)
	}
	want := map[string]struct {
		prompt, status string
		reward         float64
	}{"alpha": {"Capital of France?", "success", 1}, "beta": {"Capital of Italy?", "failure", 0}}
	for id, rs := range results {
		samples := map[int]bool{}
		for _, r := range rs {
			samples[r.Sample] = true
			w := want[id]
			if r.GroupID != id || r.Status != w.status || r.Reward != w.reward || r.HarnessExit != 0 || r.Error != "" {
				t.Errorf("result %+v; want group %s status %s reward %v", r, id, w.status, w.reward)
			}
			ep := s.episode(t, r.EpisodeID, 1)
			if ep.TaskID != id || ep.GroupID != id || ep.Calls != 1 || ep.Status != w.status || ep.Reward == nil || *ep.Reward != w.reward {
				t.Errorf("episode %s: task %q group %q calls %d status %q reward %v; want %s %s 1 %s %v",
					ep.ID, ep.TaskID, ep.GroupID, ep.Calls, ep.Status, ep.Reward, id, id, w.status, w.reward)
			}
			calls := s.calls(t, r.EpisodeID)
			if len(calls) != 1 || gjson.GetBytes(calls[0].Request, "messages.0.content").String() != w.prompt ||
				gjson.GetBytes(calls[0].Response, "choices.0.message.content").String() != answer || calls[0].Harness != "orchard-rollout-e2e/1.0" {
				t.Errorf("episode %s calls: %+v; want one call asking %q answered %q", r.EpisodeID, calls, w.prompt, answer)
			}
		}
		if !samples[0] || !samples[1] {
			t.Errorf("task %s samples %v, want 0 and 1", id, samples)
		}
	}
	if n := len(s.up.Requests()); n != 4 {
		t.Errorf("upstream saw %d requests, want 4", n)
	}
	assertSandboxesGone(t, state, sandboxes...)
}

// watchHarnessCgroups has s's upstream note, on each call, the host's view
// of the cgroups of the harness process making it (its curl, whose command
// line names the proxy); the result is read after the run.
func watchHarnessCgroups(s *runStack) *syncBuffer {
	var seen syncBuffer
	f := func(*http.Request) {
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, err := os.ReadFile(p)
			if err != nil || !bytes.Contains(b, []byte(s.proxyURL+"/e/")) {
				continue
			}
			cg, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cgroup"))
			seen.Write(cg)
		}
	}
	s.onCall.Store(&f)
	return &seen
}

// assertHarnessCgroup checks that the harness ran in sandbox id's cgroups
// (envd puts the jail there before it starts, so its cgroup namespace is
// rooted there): seen from the host, its cgroup paths end in
// orchard-envd/ID; seen from inside (its "cgroup " lines on stderr), every
// path is "/". Where this machine's cgroups are unusable, envd must have
// warned instead.
func assertHarnessCgroup(t *testing.T, id string, host *syncBuffer, stderr []byte) {
	t.Helper()
	hostLines := strings.Split(strings.TrimSpace(string(host.Bytes())), "\n")
	inSandbox := 0
	for _, l := range hostLines {
		if strings.HasSuffix(l, "/orchard-envd/"+id) {
			inSandbox++
		}
	}
	if inSandbox == 0 && !bytes.Contains(stderr, []byte("cgroup limits degraded")) {
		t.Errorf("the harness's cgroups seen from the host name no cgroup of sandbox %s, and envd warned of none:\n%s", id, host.Bytes())
	}
	inside := 0
	for _, l := range strings.Split(string(stderr), "\n") {
		if rest, ok := strings.CutPrefix(l, "cgroup "); ok {
			inside++
			if !strings.HasSuffix(rest, ":/") {
				t.Errorf("the harness sees cgroup %q: a path outside its own cgroup", rest)
			}
		}
	}
	if inside == 0 {
		t.Errorf("the harness printed no cgroup lines:\n%s", stderr)
	}
}
