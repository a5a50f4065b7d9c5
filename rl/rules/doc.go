// Package rules scores the turns of an episode with process rewards from
// a rules file: each rule has an id, a weight and a trigger over the facts
// of package rl, and every time it fires it adds a [Hit] with its delta and
// the span of text that fired it. A default set for coding agents is
// embedded ([Default]); docs/rl.md documents the file format.
//
// Anti-hacking is part of the contract, enforced at load time and while
// scoring: a rule with a positive weight must use a trigger over text the
// environment produced (a tool result), fires at most once per episode
// (test_delta excepted), and never on a result whose evidence text the
// model itself wrote into its call. Per-turn process reward is clipped to
// [-Clip, Clip], and the episode's total |process reward| is scaled to at
// most Beta, so that with outcomes of +1/-1 and Beta < 1 a resolved
// episode always out-scores an unresolved one.
//
// A [Config] is read-only after [Load] and safe for concurrent use.
package rules
