// Package advantage computes discounted returns and group advantages for
// the turns of rollouts of one task.
//
// A group is the rollouts of one task (never the turns of one rollout).
// Rollout i has an outcome R_i and per-turn process rewards p_{i,t}. Its
// turn rewards are p_{i,t}, plus R_i on its last turn; its returns are the
// discounted return-to-go of those (gamma). Its advantage at turn t is
//
//	A_{i,t} = O_i + lambda * (P_{i,t} - b_{i,t})
//
// where O_i is the outcome advantage of the chosen [Estimator] (rloo:
// R_i minus the mean of the others; grpo: (R_i - mean) / std; drgrpo:
// R_i - mean), P_{i,t} is the discounted process return-to-go from turn t,
// and b_{i,t} is the mean of P_{j,t} over the other rollouts j, where a
// rollout that ended before turn t has P_{j,t} = 0. Appending turns with
// zero process reward to rollout j therefore changes no other rollout's
// advantage, and the baseline of one rollout never depends on its own
// length. docs/rl.md has the derivation and a worked example.
//
// Defined results: a group of one, or rollouts whose values are all
// equal, get advantage 0 (grpo's std below 1e-6 counts as equal); NaN and
// ±Inf inputs count as 0; a rollout without an outcome gets no advantage
// (nil) and is left out of its group's baselines.
package advantage
