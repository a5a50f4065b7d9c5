"""orchard: sandboxes, episodes, rewards and token-level samples from Python.

``SandboxClient`` speaks the Orchard Env API of ``orchard envd`` with the
names and defaults of Microsoft Orchard's SDK; ``start_episode`` opens an
episode on the recording proxy whose samples come back token-exact.
"""

from ._http import APIError, OrchardError, ServerUnavailable
from .aio import AsyncSandboxClient, AsyncSandboxInstance
from .episode import Episode
from .rollout import EpisodeResult, run_episode
from .samples import TokenTrajectory, token_trajectories
from .sandbox import ExecEvent, JobResult, SandboxClient, SandboxInstance

__version__ = "0.1.0"

# Orchard's aliases.
Sandbox = SandboxClient
AsyncSandbox = AsyncSandboxClient

__all__ = [
    "APIError", "AsyncSandbox", "AsyncSandboxClient", "AsyncSandboxInstance", "Episode", "EpisodeResult",
    "ExecEvent", "JobResult", "OrchardError", "Sandbox", "SandboxClient", "SandboxInstance", "ServerUnavailable",
    "TokenTrajectory", "run_episode", "token_trajectories",
]
