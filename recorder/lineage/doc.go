// Package lineage tells, for each model call of an episode, how it relates
// to the calls before it: whether it continues a thread token for token
// (extend), continues it with drifted token ids (retokenized,
// template_rewrite), changes or replaces its history (edited, compacted),
// starts a new thread (fork), or repeats a prompt (retry). The result is a
// [recorder.Lineage]; docs/token-fidelity.md defines each kind.
//
// Classification is pure and incremental: a [Tracker] keeps, per episode,
// hash chains over token ids and over canonical message hashes, indexed by
// prefix, plus the units of each thread's last call. Observing a call costs
// time linear in its prompt and output, whatever the length of the episode;
// memory per episode is a few words per call plus the tips of its threads.
package lineage
