// Package embedded is the default, serverless [recorder.Store]: an
// append-only segment log in one directory, with an in-memory index built
// by scanning it.
//
// One process writes a directory ([Open] takes an exclusive flock on
// dir/LOCK); any number of others read it at the same time with
// [OpenReadOnly], which takes no lock and picks up frames appended after it
// opened by re-scanning from its last offset before every read. That is
// what lets `orchard episodes list` run beside a live `orchard proxy`.
//
// Every record (a call, an episode's metadata, an event, a delete
// tombstone) is one frame: a 4-byte little-endian payload length, a 4-byte
// CRC-32C of the payload, then the payload. Segments are named
// 0000000001.seg, 0000000002.seg, ... and rotate at [Options.SegmentBytes].
// A torn frame at the end of the last segment (a crash mid-append) is cut
// off when a writer opens the directory and is waited for by readers. A
// damaged frame with valid frames after it loses only itself: the scan
// resynchronises on the next offset where a frame's length and CRC hold,
// and counts the skipped bytes ([Store.Damaged]).
// Calls are stored with the deduplicating codec of package recorder, so an
// episode's resent history costs O(turns) bytes. Deleted episodes are
// tombstoned; their bytes stay on disk (there is no compaction yet).
// docs/recorder-embedded.md explains the choice and gives measurements.
package embedded
