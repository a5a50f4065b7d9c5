// Package rewards scores exported samples: [Score] reads the selected
// episodes once (a pre-pass, because a group's advantages need every
// rollout of the group), computes per-turn process rewards with
// rl/rules, outcomes, returns and advantages with rl/advantage, and
// returns [Scores], a reconstruct.Annotator that fills the reward fields of
// every sample during the real export. [Scores.Explain] prints one
// episode's rule hits, and [WriteCASFT] writes credit-assignment SFT
// samples.
//
// Evidence of a rule hit indexes the messages of the trajectory of the
// turn's segment, in turn samples as well: a tool result that fired a
// rule comes after the turn that called the tool, so it is not in that
// turn's own prompt.
//
// The outcome of an episode is the reward its finish posted, else the
// rules file's outcome for its status; an episode still running, or whose
// status has no outcome, has none: its turns keep their process rewards
// and returns, its advantages and trajectory reward stay null, and it is
// counted in [Stats].NoOutcome.
package rewards
