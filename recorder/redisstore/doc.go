// Package redisstore is the [recorder.Store] on Redis or Redis Cluster,
// shared by every proxy replica (`orchard proxy --redis URL`).
//
// Calls are stored with the deduplicating codec of package recorder, as
// in the embedded store: each call is one zstd frame holding its document
// and the content-addressed blocks its episode did not have yet, appended
// to the episode's log, so an episode of T turns costs O(T) bytes. All keys
// of an episode carry the hash tag {<episode id>} and live in one cluster
// slot, so that each batch of an episode's calls is appended by one Lua
// script, atomically and idempotently by call id; the scripts of a batch's
// episodes go out in one pipeline. docs/record-format.md ("Redis key
// layout") lists the keys.
//
// Several stores may write one episode at once. Each keeps its own dedup
// encoder per episode (an LRU bounds how many) whose documents name their
// base by call id, so they decode whatever the interleaving. The write
// script refuses a batch encoded against a view of the episode that Redis
// no longer matches (the episode was deleted, expired or re-created, a call
// is already stored, or the store has not seen stored calls yet); the store
// then rebuilds its encoder by observing the episode's latest frames and
// encodes again.
//
// An index of episodes in keys tagged {idx} (one slot) orders them by
// creation time and filters them by task, group and status. Finished
// episodes expire after [Options.Retention] and leave the index lazily;
// [Store.GC] deletes finished episodes older than an age.
package redisstore
