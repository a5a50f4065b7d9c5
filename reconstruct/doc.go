// Package reconstruct rebuilds recorded episodes into turn-level,
// token-exact training samples and writes them as JSONL.
package reconstruct
