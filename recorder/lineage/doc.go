// Package lineage tells, for each model call of an episode, how it relates
// to the calls before it: whether it continues a thread token for token
// (extend), continues it with drifted token ids (retokenized,
// template_rewrite), changes or replaces its history (edited, compacted),
// starts a new thread (fork), or repeats a prompt (retry). The result is a
// [recorder.Lineage]; docs/token-fidelity.md defines each kind.
//
// It is the one classification of the project. Readers run it over the
// stored episode in arrival order, so that the answer does not depend on
// which replica saw which call: [Store] for the episode API, and
// reconstruct, which calls [Classify] and builds its segments along the
// result instead of threading calls itself. A proxy run with live lineage
// also runs it at call time, one [Tracker] per process, for its metric,
// and records the result. For the calls of an
// episode in arrival order, [Classify] returns what one Tracker that
// observed them in that order returned.
//
// It also owns the canonical units classification compares: token ids,
// completions text byte by byte, and one hash per message of the
// chat.completions, responses and messages APIs. [Items] and [Output] hand
// out the message units with each message's bytes; reconstruct reads
// prompts through them and places completions by them.
//
// Classification is pure and incremental: a [Tracker] keeps, per episode,
// hash chains over token ids and over canonical message hashes, indexed by
// prefix, plus the units of each thread's last call. Observing a call costs
// time linear in its prompt and output, whatever the length of the episode;
// memory per episode is a few words per call plus the tips of its threads.
package lineage
