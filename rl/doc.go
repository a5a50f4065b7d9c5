// Package rl turns reconstructed trajectories into rewards, advantages and
// rollout plans for RL trainers.
package rl
