// Package rl reads the facts a reward can be computed from out of a
// reconstructed trajectory: per assistant turn, its tool calls matched by
// call id to the tool results that answer them, each result's exit code and
// timeout when the harness renders one, the files a call read, listed or
// edited, test runs with per-test pass/fail, the completion's end, and calls
// that are malformed or name a tool the request did not offer.
//
// Facts never judge: rl/rules turns them into rewards, rl/advantage into
// advantages, rl/rewards into annotated samples. Every fact that comes
// from text carries a [Span] into [Text] of its message, so that a reward
// can point at the bytes that caused it.
//
// Harness renderings (testdata/harness-requests): Codex CLI writes
// "Process exited with code N" in its function_call_output; Qwen Code
// writes "Exit Code: N" in its tool result; opencode renders a timeout as
// "bash tool terminated command after exceeding timeout N ms" (newer
// releases say "shell tool", packages/opencode/src/tool/bash.ts) and shows
// no exit code; Claude Code shows neither (its is_error flag does not
// survive into the chat view). Where a harness shows no exit code, a
// result fails when a parsed test run has failures.
package rl
