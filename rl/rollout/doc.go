// Package rollout runs an unmodified agent harness against tasks in
// sandboxes and scores each attempt.
//
// One episode (Runner.Episode) is: a sandbox created through envd with an
// episode opened on the recording proxy (envd asks the proxy's episode
// API; this package never talks to the proxy itself), the task's files
// copied into the work directory, the harness run with the episode's
// OPENAI_*/ANTHROPIC_* env injected by envd, the verifier run, and the
// outcome posted as the episode's reward before the sandbox is deleted.
// Failures of the infrastructure never panic or return an error: they come
// back as a Result with status "error" and Error set.
//
// The reward is [VerifierReward]: the number on the verifier's last stdout
// line, else 1 when it exits 0 and 0 otherwise; with no verifier, 1 when
// the harness exits 0. A harness that runs past its time limit scores 0
// with status "timeout".
//
// Runner.Rollout runs every task Options.N times (one episode each, all in
// group task_id) with at most Options.Concurrency at once. Every default
// lives in [Defaults]; New fills the zero fields that have no meaning of
// their own (Workdir, Network, N, Concurrency, Output). A zero timeout
// means no limit.
package rollout
