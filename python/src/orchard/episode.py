"""Episodes on the recording proxy: open, feed events, finish, read samples."""

from __future__ import annotations

import time
from typing import Any

from ._http import OrchardError, Transport


class EpisodeAPI:
    """The proxy's episode API (``/orchard/v1/episodes``), with the admin token."""

    def __init__(self, proxy_url: str | None, admin_token: str | None, timeout: float,
                 max_retries: int, retry_delay: float):
        self.proxy_url = proxy_url.rstrip("/") if proxy_url else None
        headers = {"Authorization": "Bearer " + admin_token} if admin_token else {}
        self.transport = Transport(self.proxy_url or "", headers, timeout, max_retries, retry_delay)

    def _need(self) -> Transport:
        if not self.proxy_url:
            raise OrchardError("no proxy configured: pass proxy_url= (and admin_token=) to the client, "
                               "or set ORCHARD_PROXY_URL (and ORCHARD_ADMIN_TOKEN)")
        return self.transport

    def start(self, task_id: str, group_id: str | None, metadata: dict[str, Any] | None,
              episode_id: str | None) -> "Episode":
        if not task_id:
            raise ValueError("task_id is required")
        body: dict[str, Any] = {"task_id": task_id}
        for key, value in (("group_id", group_id), ("metadata", metadata), ("id", episode_id)):
            if value is not None:
                body[key] = value
        res = self._need().request("POST", "/orchard/v1/episodes", body)
        return Episode(res["id"], res["env"]["OPENAI_BASE_URL"], res["token"], dict(res["env"]), self)


class Episode:
    """One episode: the harness's model calls recorded under ``id``.

    ``base_url`` and ``api_key`` are what an OpenAI-compatible harness
    needs (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``); ``env`` holds those
    and the Anthropic equivalents, ready to pass as a command's env. The
    key is scoped to this episode and stops working once it is finished.
    """

    def __init__(self, id: str, base_url: str, api_key: str, env: dict[str, str], api: EpisodeAPI):
        self.id = id
        self.base_url = base_url
        self.api_key = api_key
        self.env = {**env, "ORCHARD_EPISODE_ID": id}
        self._api = api

    def _path(self, rest: str = "") -> str:
        return f"/orchard/v1/episodes/{self.id}{rest}"

    def event(self, type: str, **data: Any) -> dict[str, Any]:
        """Record an environment event (test results, a tool's output...)."""
        return self._api._need().request("POST", self._path("/events"), {"type": type, **data})

    def finish(self, reward: float | None = None, status: str = "success",
               info: dict[str, Any] | None = None) -> dict[str, Any]:
        """Close the episode with its outcome (status: success, failure, error or timeout)."""
        body: dict[str, Any] = {"reward": reward, "status": status}
        if info is not None:
            body["info"] = info
        return self._api._need().request("POST", self._path("/finish"), body)

    def get(self) -> dict[str, Any]:
        """The episode's summary: status, reward, number of calls recorded."""
        return self._api._need().request("GET", self._path())

    def samples(self, format: str = "trajectories", min_calls: int = 0, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The token-level training samples of the finished episode.

        The proxy stores calls a few milliseconds after their answers, so
        right after the harness ends the last ones may not be in yet: with
        ``min_calls`` this waits (up to ``timeout`` seconds) until that
        many calls are recorded.
        """
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            res = self._api._need().request("GET", self._path("/samples"), params={"format": format})
            if res.get("calls", 0) >= min_calls:
                return res["samples"]
            if time.monotonic() >= deadline:
                raise TimeoutError(f"episode {self.id}: {res.get('calls')} calls recorded after {timeout}s, "
                                   f"want {min_calls}")
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def __repr__(self) -> str:
        return f"Episode(id={self.id})"
