package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/envd/local"
	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/proxy/proxytest"
	"github.com/orchard-rl/orchard/recorder"
)

// qwenVersion is the Qwen Code release .ci/install-harness.sh installs.
const qwenVersion = "0.15.10"

// qwenBin finds the Qwen Code CLI: $ORCHARD_QWEN_BIN, else the cache
// .ci/install-harness.sh installs into ($ORCHARD_HARNESS_DIR, default
// $HOME/.cache/orchard-harness). "" with the reason when there is none.
func qwenBin() (string, string) {
	if p := os.Getenv("ORCHARD_QWEN_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Sprintf("ORCHARD_QWEN_BIN=%s: %v", p, err)
		}
		return p, ""
	}
	dir := os.Getenv("ORCHARD_HARNESS_DIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", "no home directory to find the harness cache in"
		}
		dir = filepath.Join(home, ".cache", "orchard-harness")
	}
	p := filepath.Join(dir, "node_modules", ".bin", "qwen")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Sprintf("Qwen Code is not installed (%s missing): run .ci/install-harness.sh or set ORCHARD_QWEN_BIN", p)
	}
	return p, ""
}

// TestHarnessE2EQwenCode runs a real, unmodified Qwen Code through
// `orchard run` (a separate orchard process) in a local bubblewrap sandbox
// served by an in-process envd, against an in-process `orchard proxy` on
// the embedded store whose upstream is a scripted model. The script makes
// Qwen Code write a file with its shell tool, then answer; the verifier
// checks the file and prints the reward. The episode must hold the
// harness's calls and the verifier's reward.
func TestHarnessE2EQwenCode(t *testing.T) {
	qwen, why := qwenBin()
	if qwen == "" {
		t.Skip(why)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: Qwen Code needs it")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap (bwrap) is not installed: the local sandbox backend needs it")
	}
	if strings.HasPrefix(qwen, os.TempDir()) {
		t.Skipf("Qwen Code at %s is under %s, which sandboxes do not see (they get a fresh /tmp)", qwen, os.TempDir())
	}

	const (
		model  = "harness-e2e"
		admin  = "harness-e2e-admin-token"
		marker = "orchard-harness-e2e-ok"
		reward = 0.75
	)
	// Turn k answers a request whose history holds k assistant turns. Qwen
	// Code's history opens with a canned assistant message, so its first
	// call is turn 1 (tool call) and the call after the tool ran is turn 2
	// (the final answer). Turn 0 is also the tool call, for a harness
	// without the canned message.
	shell := llmtest.Turn{Choice: llmtest.Choice{
		Content: llmtest.Pieces{"I will write the file."},
		ToolCalls: []llmtest.ToolCall{{ID: "call_e2e_1", Name: "run_shell_command",
			Arguments: llmtest.Pieces{`{"command":"echo ` + marker + ` > result.txt",`, `"description":"Write the result file"}`}}},
	}}
	script := &llmtest.Script{Profile: llmtest.ProfileVLLM, Turns: []llmtest.Turn{
		shell, shell,
		{Choice: llmtest.Choice{Content: llmtest.Pieces{"Done: ", "result.txt", " is written."}}},
	}}
	up := llmtest.NewServer(llmtest.Options{Scripts: map[string]*llmtest.Script{model: script}})
	defer up.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var logs syncBuffer
	lg := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	defer func() {
		if t.Failed() {
			t.Logf("proxy and envd logs:\n%s", logs.Bytes())
		}
	}()

	// orchard proxy, embedded store, episode API behind the admin token.
	pcfg := &proxyConfig{Listen: "127.0.0.1:0", Upstream: up.URL() + "/v1", UpstreamKind: "vllm", Data: t.TempDir(),
		IdleTimeout: time.Minute, MaxBody: 32 << 20, AdminToken: admin, TokenTTL: time.Hour}
	pctx, stopProxy := context.WithCancel(ctx)
	pready, pdone := make(chan string, 1), make(chan error, 1)
	go func() { pdone <- runProxy(pctx, pcfg, lg, pready) }()
	var proxyURL string
	select {
	case addr := <-pready:
		proxyURL = "http://" + addr
	case err := <-pdone:
		stopProxy()
		t.Fatalf("proxy: %v", err)
	}
	defer func() {
		stopProxy()
		if err := <-pdone; err != nil {
			t.Errorf("proxy: %v", err)
		}
	}()

	// orchard envd, local backend. The test binary is the sandbox agent
	// (ORCHARD_TEST_MAIN=1 makes it run main; the jail clears the env, so
	// it goes in AgentEnv).
	envdToken := randomToken()
	ecfg := &envdConfig{Listen: "127.0.0.1:0", Backend: "local", Proxy: proxyURL, AdminToken: admin, Token: envdToken,
		DefaultTTL: time.Hour, MaxTTL: 2 * time.Hour, IdleTimeout: time.Hour,
		// Qwen Code lives under $HOME, which the default jail (a minimal
		// root, run as nobody) does not show: this test runs the host root
		// as the image, as envd's user (the harness, not the jail, is what
		// it tests; TestEscape in envd/local tests the default jail).
		Local: local.Options{StateDir: searchableTempDir(t), Network: "proxy", NoUserNS: true, AgentPath: os.Args[0],
			AgentEnv: []string{"ORCHARD_TEST_MAIN=1"}, CgroupParent: fmt.Sprintf("orchard-e2e-%d", os.Getpid())}}
	ectx, stopEnvd := context.WithCancel(ctx)
	eready, edone := make(chan string, 1), make(chan error, 1)
	go func() { edone <- runEnvd(ectx, ecfg, lg, eready) }()
	var envdURL string
	select {
	case addr := <-eready:
		envdURL = "http://" + addr
	case err := <-edone:
		stopEnvd()
		t.Skipf("local envd backend unavailable: %v", err)
	}
	defer func() {
		stopEnvd()
		if err := <-edone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("envd: %v", err)
		}
	}()

	// orchard run, as its own process, wrapping the unmodified harness.
	run := exec.CommandContext(ctx, os.Args[0], "run",
		"--envd", envdURL, "--envd-token", envdToken,
		"--task-id", "qwen-e2e", "--group-id", "g-e2e", "--image", "/",
		"--prompt", "Write the marker into result.txt using the shell.",
		"--env", "OPENAI_MODEL="+model,
		"--timeout", "3m", "--verifier-timeout", "30s",
		"--verifier", fmt.Sprintf(`test "$(cat result.txt)" = %s && echo %v`, marker, reward),
		"--", qwen, "--auth-type", "openai", "-p", "{prompt}", "-y")
	run.Env = append(os.Environ(), "ORCHARD_TEST_MAIN=1")
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	run.WaitDelay = 10 * time.Second
	err := run.Run()
	t.Logf("orchard run stdout: %s", stdout.Bytes())
	if err != nil {
		t.Fatalf("orchard run: %v\nstderr (harness output):\n%s", err, stderr.Bytes())
	}
	var res runResult
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		t.Fatalf("orchard run result line: %v\n%s", err, stdout.Bytes())
	}
	if res.Status != "success" || res.Reward != reward || res.HarnessExit != 0 || res.VerifierExit == nil || *res.VerifierExit != 0 || res.EpisodeID == "" {
		t.Fatalf("run result %+v\nstderr:\n%s", res, stderr.Bytes())
	}

	// The episode, read back through the proxy's episode API: calls reach
	// the store asynchronously, the outcome was posted before run exited.
	auth := map[string]string{"Authorization": "Bearer " + admin}
	var got struct {
		recorder.EpisodeSummary
		CallList []*recorder.Call `json:"call_list"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := proxytest.Do(t, "GET", proxyURL+"/orchard/v1/episodes/"+res.EpisodeID+"?calls=true", auth, nil)
		if r.Status == 200 {
			got.CallList = nil
			if err := json.Unmarshal(r.Body, &got); err != nil {
				t.Fatalf("episode: %v\n%s", err, r.Body)
			}
			if got.Calls >= 2 && len(got.CallList) == got.Calls {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("episode %s: %d %s", res.EpisodeID, r.Status, r.Body)
		}
		waitABit()
	}
	if got.TaskID != "qwen-e2e" || got.GroupID != "g-e2e" || got.Status != recorder.StatusSuccess || got.Reward == nil || *got.Reward != reward {
		t.Errorf("episode: task %q group %q status %q reward %v; want qwen-e2e g-e2e success %v",
			got.TaskID, got.GroupID, got.Status, got.Reward, reward)
	}
	for _, c := range got.CallList {
		if !strings.HasPrefix(c.Harness, "QwenCode/"+qwenVersion) {
			t.Errorf("call %d: harness %q, want Qwen Code's User-Agent QwenCode/%s", c.Seq, c.Harness, qwenVersion)
		}
		if c.Status != 200 || c.Path != "/e/"+res.EpisodeID+"/v1/chat/completions" || c.Model != model || !c.Stream {
			t.Errorf("call %d: status %d path %s model %q stream %v", c.Seq, c.Status, c.Path, c.Model, c.Stream)
		}
	}
	// The second call carries the shell tool's result back to the model:
	// Qwen Code really ran the command in the sandbox.
	second := string(got.CallList[1].Request)
	if !strings.Contains(second, "call_e2e_1") || !strings.Contains(second, `"role":"tool"`) {
		t.Errorf("second call lacks the tool result:\n%.2000s", second)
	}
	if n := len(up.Requests()); n != got.Calls {
		t.Errorf("upstream saw %d requests, the episode holds %d calls", n, got.Calls)
	}
}
