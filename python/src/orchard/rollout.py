"""One RL rollout: an unmodified harness in a sandbox, recorded by the proxy."""

from __future__ import annotations

from dataclasses import dataclass, field

from .samples import TokenTrajectory, token_trajectories
from .sandbox import SandboxClient


@dataclass
class EpisodeResult:
    """What a rollout hands the trainer."""

    episode_id: str
    status: str
    reward: float | None
    trajectories: list[TokenTrajectory] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""


def run_episode(client: SandboxClient, task_id: str, command: str, *, group_id: str | None = None,
                files: dict[str, bytes] | None = None, verifier: str | None = None, image: str = "default",
                timeout: int = 600, min_calls: int = 1) -> EpisodeResult:
    """Run ``command`` (the harness) in a fresh sandbox under a new episode.

    ``files`` are uploaded into the work directory first. The harness gets
    the episode's base URLs and key in its environment, so its model calls
    go through the proxy. ``verifier``, when set, runs afterwards in the
    same sandbox (without the episode's key); the last line of its stdout
    is the reward (a number). The episode is finished with that reward
    (status success, or failure when the harness exited non-zero, error
    when something broke) and its token trajectories are returned; they
    are read once at least ``min_calls`` calls are recorded.
    """
    episode = client.start_episode(task_id, group_id=group_id)
    try:
        with client.create_sandbox(image, block_network=False) as sb:
            for path, content in (files or {}).items():
                sb.upload_content(content, path)
            run = sb.exec(command, timeout=timeout, env=episode.env)
            reward = None
            if verifier:
                check = sb.exec(verifier, timeout=timeout)
                lines = check.stdout.strip().splitlines()
                reward = float(lines[-1]) if check.succeeded and lines else 0.0
    except BaseException as exc:
        episode.finish(reward=None, status="error", info={"error": f"{type(exc).__name__}: {exc}"})
        raise
    status = "success" if run.succeeded else "failure"
    episode.finish(reward=reward, status=status, info={"exit_code": run.exit_code})
    samples = episode.samples(format="trajectories", min_calls=min_calls)
    return EpisodeResult(episode.id, status, reward, token_trajectories(samples), run.stdout, run.stderr)
