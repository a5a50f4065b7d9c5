// Package plan spends a rollout budget where it teaches: on tasks whose
// next group of rollouts is likely to hold both passes and failures.
//
// In group-based RL (GRPO, RLOO) a group whose rollouts all pass or all
// fail has zero advantage and trains nothing; with a binary outcome and
// group size n that happens with probability p^n + (1-p)^n. A [Planner]
// keeps a Beta posterior on each task's pass rate, samples the tasks of a
// step in proportion to the posterior probability that a group is
// informative, 1 - E[p^n] - E[(1-p)^n], plus a staleness bonus, and parks
// tasks it is sure about. It runs each chosen task in strides: the first
// of n rollouts, each next one sized from the posterior predictive so the
// group can be balanced, giving up when that probability drops below
// [Options.Confidence]. A balanced group is selected as Orchard's
// released rule does (MSR-Orchard/slime, slime/rollout/sglang_rollout.py,
// _try_select_training_group and progressive_generate_and_rm_group): the
// positive share closest to the middle of [Lo, Hi], completed before
// truncated before timed out before aborted, then shorter generated
// length. Unlike that rule, the planner remembers tasks across steps and
// keeps the completed rollouts it did not select for the task's next
// group (policy version within one) instead of discarding them.
//
// [Drive] is the one loop that runs a planner against a budget; the
// simulation test and `orchard rollout --adaptive` both use it. A Planner
// is deterministic given its seed and the outcomes it observes, so a
// stopped run is resumed by driving it again and answering the rollouts
// that already finished from the store. A Planner is not safe for
// concurrent use.
package plan
