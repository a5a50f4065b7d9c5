// Package reconstruct rebuilds recorded episodes into turn-level,
// token-exact training samples and writes them as JSONL or, for the
// trainer formats, parquet. In every format no token the policy did not
// generate in a segment is trainable (docs/sample-format.md).
package reconstruct
