"""Token trajectories out of ``orchard.trajectory/v1`` samples."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TokenTrajectory:
    """One trajectory split the way trainers take it.

    ``prompt_ids`` are the tokens before the first generated one;
    ``response_ids`` the rest, with ``response_mask`` 1 on tokens the
    policy generated (0 on tool output and other prompt tokens between
    turns) and ``response_logprobs`` their rollout logprobs (0 elsewhere).
    ``reward`` is the episode's.
    """

    episode_id: str
    segment: int
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float]
    reward: float | None
    num_turns: int

    @classmethod
    def from_sample(cls, sample: dict[str, Any]) -> "TokenTrajectory | None":
        """Split a trajectories-format sample; None when it has no token ids."""
        tokens = sample.get("tokens")
        if not tokens or not tokens.get("input_ids"):
            return None
        ids, mask = tokens["input_ids"], tokens["loss_mask"]
        logprobs = tokens.get("logprobs") or [0.0] * len(ids)
        start = next((i for i, m in enumerate(mask) if m), len(ids))
        outcome = sample.get("outcome") or {}
        return cls(episode_id=sample["episode_id"], segment=sample.get("segment", 0),
                   prompt_ids=ids[:start], response_ids=ids[start:], response_mask=mask[start:],
                   response_logprobs=logprobs[start:], reward=outcome.get("reward"),
                   num_turns=len(sample.get("messages") or []))


def token_trajectories(samples: list[dict[str, Any]]) -> list[TokenTrajectory]:
    """The trajectories with token ids among ``samples``, in order."""
    return [t for t in (TokenTrajectory.from_sample(s) for s in samples) if t is not None]
