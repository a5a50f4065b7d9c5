"""verl agent loop: an unmodified harness in an orchard sandbox, per sample.

verl's agent loops (verl/experimental/agent_loop/agent_loop.py) return an
``AgentLoopOutput`` with ``prompt_ids``, ``response_ids``, ``response_mask``
(1 on generated tokens), ``response_logprobs``, ``reward_score`` and
``num_turns``. This loop gets them from orchard instead of generating
itself: the harness talks to the proxy (which forwards to the rollout
server verl runs), and the proxy's records give the exact token ids.

Register it in verl with the agent loop config (``_target_:
verl_agent_loop.OrchardAgentLoop``, name ``orchard_sandbox``). Without verl
installed the classes below stand in, so the file runs on its own:

    ORCHARD_ENVD_URL=http://127.0.0.1:7000 ORCHARD_PROXY_URL=http://127.0.0.1:8080 \\
        python verl_agent_loop.py fix-test
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

import _common

try:
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
except ImportError:  # stand-ins with verl's names, for running this file alone
    class AgentLoopBase:  # type: ignore[no-redef]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

    @dataclass
    class AgentLoopOutput:  # type: ignore[no-redef]
        prompt_ids: list[int]
        response_ids: list[int]
        response_mask: list[int]
        response_logprobs: list[float] | None = None
        reward_score: float | None = None
        num_turns: int = 0
        metrics: dict[str, Any] = field(default_factory=dict)

    def register(name: str):  # type: ignore[no-redef]
        return lambda cls: cls


@register("orchard_sandbox")
class OrchardAgentLoop(AgentLoopBase):
    """Runs the harness on the sample's task; the reward comes from the verifier."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra = kwargs.get("extra_info") or {}
        task_id = str(extra.get("task_id") or kwargs.get("index") or "task")
        res = await asyncio.to_thread(_common.rollout, task_id, extra.get("group_id"))
        t = res.trajectories[-1]  # the main line of the episode: its last segment
        return AgentLoopOutput(prompt_ids=t.prompt_ids, response_ids=t.response_ids, response_mask=t.response_mask,
                               response_logprobs=t.response_logprobs, reward_score=res.reward,
                               num_turns=t.num_turns, metrics={})


def main() -> None:
    task = sys.argv[1] if len(sys.argv) > 1 else "fix-test"
    out = asyncio.run(OrchardAgentLoop().run({}, extra_info={"task_id": task, "group_id": "verl-group"}))
    fields = ("prompt_ids", "response_ids", "response_mask", "response_logprobs", "reward_score", "num_turns")
    data = asdict(out) if hasattr(out, "__dataclass_fields__") else out.model_dump()
    print(json.dumps({k: data[k] for k in fields}))


if __name__ == "__main__":
    main()
