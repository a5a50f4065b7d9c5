"""slime custom generate function: an unmodified harness in an orchard sandbox.

slime calls ``--custom-generate-function-path slime_generate.generate`` as
``await generate(args, sample, sampling_params)`` and trains on the
returned ``Sample`` (slime/utils/types.py): ``tokens`` (prompt and
response), ``response_length``, ``loss_mask`` (one entry per response
token, 1 where the policy generated it), ``rollout_log_probs`` and
``reward``. The harness's model calls go through the proxy to slime's
SGLang router; the token ids come from the proxy's records.

Without slime installed the Sample below stands in, so the file runs alone:

    ORCHARD_ENVD_URL=http://127.0.0.1:7000 ORCHARD_PROXY_URL=http://127.0.0.1:8080 \\
        python slime_generate.py fix-test
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import _common

try:
    from slime.utils.types import Sample
except ImportError:  # a stand-in with slime's field names
    @dataclass
    class Sample:  # type: ignore[no-redef]
        class Status(Enum):
            PENDING = "pending"
            COMPLETED = "completed"
            TRUNCATED = "truncated"
            ABORTED = "aborted"

        index: int | None = None
        prompt: Any = ""
        tokens: list[int] = field(default_factory=list)
        response: str = ""
        response_length: int = 0
        reward: float | None = None
        loss_mask: list[int] | None = None
        rollout_log_probs: list[float] | None = None
        status: "Sample.Status" = Status.PENDING
        metadata: dict = field(default_factory=dict)


async def generate(args: Any, sample: Sample, sampling_params: dict[str, Any]) -> Sample:
    """Fill ``sample`` from one episode of the harness on its task."""
    task_id = str((sample.metadata or {}).get("task_id") or sample.index or "task")
    res = await asyncio.to_thread(_common.rollout, task_id, (sample.metadata or {}).get("group_id"))
    t = res.trajectories[-1]
    sample.tokens = t.prompt_ids + t.response_ids
    sample.response_length = len(t.response_ids)
    sample.loss_mask = t.response_mask
    sample.rollout_log_probs = t.response_logprobs
    sample.reward = res.reward
    sample.response = res.stdout
    sample.metadata = {**(sample.metadata or {}), "episode_id": res.episode_id}
    sample.status = Sample.Status.COMPLETED
    return sample


def main() -> None:
    task = sys.argv[1] if len(sys.argv) > 1 else "fix-test"
    s = asyncio.run(generate(None, Sample(index=0, metadata={"task_id": task, "group_id": "slime-group"}), {}))
    print(json.dumps({"tokens": s.tokens, "response_length": s.response_length, "loss_mask": s.loss_mask,
                      "rollout_log_probs": s.rollout_log_probs, "reward": s.reward, "status": s.status.value}))


if __name__ == "__main__":
    main()
