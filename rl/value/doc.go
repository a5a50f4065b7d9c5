// Package value writes value-model training data: one
// orchard.value/v1 line per model turn of each episode, pairing the
// trajectory prefix up to and including that turn's completion with the
// episode's outcome, so a model trained on it predicts the outcome from a
// partial trajectory (what the `http` scorer of rl/score serves).
//
// Prefixes are token-exact when the engine's ids were recorded
// (input_ids: the turn's prompt ids then its completion ids); messages
// are always given. Long tool and user observations can be compacted to
// their head and tail. The package reads samples only through
// reconstruct's public export.
package value
