// Package score rates candidate episodes with a value in [0, 1] and
// picks the best of N per task.
//
// A [Scorer] scores one episode at a time. Three are built in: [HTTP]
// posts the candidate to a user's value-model server (the JSON API in
// docs/rl-rollout.md), [Judge] asks an OpenAI-compatible chat model with
// a fixed prompt ([JudgePrompt]) and parses its answer strictly, and
// [Rules] maps an episode's per-rule reward totals to a value through a
// logistic. Every scorer's answer is checked the same way: a value that
// is NaN or outside [0, 1] is an error naming the candidate.
//
// [Rerank] scores the candidates of each task and picks the highest,
// continuing or stopping on a scorer's error as its [OnError] says;
// [Evaluate] measures a reranking against known outcomes (pass@N,
// best@N, random@N, AUC, ECE).
package score
