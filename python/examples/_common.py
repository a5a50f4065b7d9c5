"""What both examples share: the client from the environment, the harness files."""

from __future__ import annotations

import os
import sys

import orchard

HERE = os.path.dirname(os.path.abspath(__file__))

#: The harness command; the default runs toy_harness.py with the sandbox's python3.
HARNESS = os.environ.get("ORCHARD_HARNESS_CMD", "python3 toy_harness.py > answer.txt")
#: The verifier prints the reward: 1 when the harness says it fixed the test.
VERIFIER = os.environ.get("ORCHARD_VERIFIER_CMD", "grep -q 'Fixed it.' answer.txt && echo 1 || echo 0")


def client() -> orchard.SandboxClient:
    """A client for ORCHARD_ENVD_URL (or SANDBOX_BASE_URL) and ORCHARD_PROXY_URL."""
    return orchard.SandboxClient(retry_delay=0.2)


def harness_files() -> dict[str, bytes]:
    with open(os.path.join(HERE, "toy_harness.py"), "rb") as f:
        return {"toy_harness.py": f.read()}


def rollout(task_id: str, group_id: str | None = None) -> orchard.EpisodeResult:
    """One episode of the harness on task_id; fails loudly without token ids."""
    res = orchard.run_episode(client(), task_id, HARNESS, group_id=group_id, files=harness_files(),
                              verifier=VERIFIER, min_calls=int(os.environ.get("ORCHARD_MIN_CALLS", "1")))
    if not res.trajectories:
        sys.exit(f"episode {res.episode_id}: no token ids recorded (run the proxy with --upstream-kind vllm or sglang)")
    return res
