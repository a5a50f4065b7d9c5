"""Sandboxes through the Orchard Env compatible API of ``orchard envd``.

Names, arguments and defaults follow Microsoft Orchard's SDK
(``orchard_env/orchard_env/client/sandbox_client.py``), so code written
for it runs unchanged against envd.
"""

from __future__ import annotations

import base64
import os
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterator

from . import _cleanup
from ._http import APIError, Transport
from .episode import Episode, EpisodeAPI


class JobResult:
    """Result of a job execution (Orchard's JobResponse)."""

    def __init__(self, data: dict[str, Any]):
        self.job_id: str = data["job_id"]
        self.sandbox_id: str = data["sandbox_id"]
        self.command: str = data["command"]
        self.status: str = data["status"]
        self.stdout: str = data.get("stdout") or ""
        self.stderr: str = data.get("stderr") or ""
        self.exit_code: int | None = data.get("exit_code")
        self.error: str | None = data.get("error")
        self.created_at: float = data["created_at"]
        self.started_at: float | None = data.get("started_at")
        self.completed_at: float | None = data.get("completed_at")

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    @property
    def is_complete(self) -> bool:
        return self.status in ("succeeded", "failed")

    def __repr__(self) -> str:
        return f"JobResult(status={self.status}, exit_code={self.exit_code})"


@dataclass(frozen=True)
class ExecEvent:
    """One event of :meth:`SandboxInstance.exec_stream`.

    ``type`` is ``"stdout"`` or ``"stderr"`` (``data`` holds the text) or
    ``"exit"`` (the last event: ``exit_code``, and ``timed_out`` when the
    command was killed by its timeout).
    """

    type: str
    data: str = ""
    exit_code: int | None = None
    timed_out: bool = False


class SandboxInstance:
    """A sandbox that runs commands and holds files."""

    def __init__(self, client: "SandboxClient", sandbox_id: str, data: dict[str, Any]):
        self._client = client
        self.sandbox_id = sandbox_id
        self.namespace = data.get("namespace")
        self.image = data.get("image")
        self.block_network = data.get("block_network")
        #: envd's own id of the sandbox (its native /envd/v1 API).
        self.envd_id: str = data.get("pod_name") or sandbox_id
        self.workdir: str | None = data.get("workdir")
        self._deleted = False
        self._heartbeat_thread: threading.Thread | None = None
        self._heartbeat_stop = threading.Event()

    def _check(self) -> None:
        if self._deleted:
            raise RuntimeError("Sandbox has been deleted")

    def _path(self, rest: str = "") -> str:
        return f"/sandboxes/{self.sandbox_id}{rest}"

    def start_heartbeat(self, interval: int = 60) -> None:
        """Send a heartbeat every ``interval`` seconds from a daemon thread."""
        if self._heartbeat_thread and self._heartbeat_thread.is_alive():
            return
        self._heartbeat_stop.clear()

        def loop() -> None:
            while not self._heartbeat_stop.wait(interval) and not self._deleted:
                try:
                    self.heartbeat()
                except Exception:  # noqa: BLE001 - best effort
                    pass

        self._heartbeat_thread = threading.Thread(target=loop, daemon=True, name=f"heartbeat-{self.sandbox_id[:8]}")
        self._heartbeat_thread.start()

    def stop_heartbeat(self) -> None:
        self._heartbeat_stop.set()
        if self._heartbeat_thread:
            self._heartbeat_thread.join(timeout=5)
            self._heartbeat_thread = None

    def heartbeat(self) -> dict[str, Any]:
        """Mark the sandbox in use now (resets envd's idle timer)."""
        return self._client._request("POST", self._path("/heartbeat"))

    def exec(self, command: str | list[str], timeout: int | None = None, cwd: str | None = None,
             env: dict[str, str] | None = None, wait: bool = True, poll_interval: float = 0.1,
             login_shell: bool = False, pty: bool = False, rows: int = 24, cols: int = 80) -> JobResult:
        """Run ``command`` under bash -c (a list is joined with spaces).

        With ``wait`` the call returns the finished job; without, the
        queued job at once (poll it with :meth:`get_job` or
        :meth:`wait_job`). ``timeout`` defaults to 300 s; a command killed
        by it fails with exit code 124. ``pty`` sessions are not served:
        use :meth:`exec_stream`.
        """
        self._check()
        if pty:
            raise NotImplementedError("PTY sessions are not served by orchard envd; use exec_stream()")
        body = {"command": command, "timeout_seconds": timeout, "cwd": cwd, "env": env,
                "login_shell": login_shell, "wait": wait}
        exec_timeout = timeout or 300
        res = self._client._request("POST", self._path("/exec"), json=body, timeout=exec_timeout + 60)
        if not wait:
            return JobResult({"job_id": res["job_id"], "sandbox_id": self.sandbox_id, "command": str(command),
                              "status": res.get("status", "queued"), "created_at": time.time()})
        if res.get("status") in ("succeeded", "failed"):
            return JobResult(res)
        deadline = time.monotonic() + exec_timeout + 60
        while True:  # the server's wait ran out: keep waiting server-side
            job = self.wait_job(res["job_id"], timeout=max(1, int(deadline - time.monotonic())))
            if job.is_complete:
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"Job {res['job_id']} did not complete within {exec_timeout}s")
            time.sleep(poll_interval)

    def get_job(self, job_id: str) -> JobResult:
        return JobResult(self._client._request("GET", f"/jobs/{job_id}"))

    def wait_job(self, job_id: str, timeout: float = 300) -> JobResult:
        """Wait server-side up to ``timeout`` seconds; the job may still be running."""
        data = self._client._request("GET", f"/jobs/{job_id}/wait", params={"timeout": timeout},
                                     timeout=timeout + 30, ok=(408,))
        return JobResult(data)

    def exec_stream(self, command: str | list[str], timeout: int | None = None, cwd: str | None = None,
                    env: dict[str, str] | None = None) -> Iterator[ExecEvent]:
        """Run ``command`` and yield its output as it comes, then an exit event.

        A string runs under /bin/sh -c, a list as an argument vector.
        """
        self._check()
        body: dict[str, Any] = {"stream": True, "env": env, "cwd": cwd}
        if isinstance(command, str):
            body["shell"] = command
        else:
            body["cmd"] = list(command)
        if timeout:
            body["timeout"] = timeout
        body = {k: v for k, v in body.items() if v is not None}
        for event, data in self._client._transport.stream("POST", f"/envd/v1/sandboxes/{self.envd_id}/exec",
                                                          body, timeout=(timeout or 600) + 60):
            if event in ("stdout", "stderr"):
                text = data.get("data")
                if text is None and data.get("data_b64"):
                    text = base64.b64decode(data["data_b64"]).decode("utf-8", "replace")
                yield ExecEvent(event, text or "")
            elif event == "end":
                result = data.get("result") or {}
                yield ExecEvent("exit", exit_code=result.get("exit_code"), timed_out=bool(result.get("timed_out")))
                return

    def apply_patch(self, patch: str, timeout: int = 30) -> dict[str, Any]:
        """Apply a unified diff in the sandbox's work directory (git apply)."""
        self._check()
        return self._client._request("POST", self._path("/apply_patch"),
                                     json={"patch": patch, "timeout_seconds": timeout})

    def upload_file(self, local_path: str, remote_path: str) -> dict[str, Any]:
        with open(local_path, "rb") as f:
            return self.upload_content(f.read(), remote_path)

    def upload_content(self, content: bytes, remote_path: str) -> dict[str, Any]:
        self._check()
        return self._client._request("POST", self._path("/files"),
                                     json={"path": remote_path, "content": base64.b64encode(content).decode()})

    def download_content(self, remote_path: str) -> bytes:
        self._check()
        res = self._client._request("GET", self._path("/files"), params={"path": remote_path})
        return base64.b64decode(res["content"])

    def download_file(self, remote_path: str, local_path: str) -> int:
        content = self.download_content(remote_path)
        with open(local_path, "wb") as f:
            f.write(content)
        return len(content)

    def list_files(self, remote_path: str = "/") -> list[dict[str, Any]]:
        """List a directory: dicts with name, type (file|directory), size, modified."""
        self._check()
        return self._client._request("GET", self._path("/files/list"), params={"path": remote_path})["files"]

    def delete(self) -> None:
        """Delete the sandbox (once; later calls do nothing)."""
        if self._deleted:
            return
        self.stop_heartbeat()
        self._client._forget(self.sandbox_id)
        self._client._request("DELETE", self._path())
        self._deleted = True

    def __enter__(self) -> "SandboxInstance":
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()

    def __repr__(self) -> str:
        return f"SandboxInstance(id={self.sandbox_id}, status={'deleted' if self._deleted else 'active'})"


def _env(*names: str) -> str | None:
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    return None


class SandboxClient:
    """Client of one ``orchard envd`` (or any Orchard Env server).

    ``base_url`` falls back to ``SANDBOX_BASE_URL``, then ``ORCHARD_ENVD_URL``,
    then ``http://localhost:8000``; ``api_key`` to ``SANDBOX_API_KEY``, then
    ``ORCHARD_ENVD_TOKEN``; ``prefix`` to ``SANDBOX_PREFIX``, then
    ``ORCHARD_SANDBOX_PREFIX``. With ``auto_cleanup`` every sandbox this
    client creates is deleted at exit and on SIGINT/SIGTERM if still alive.

    Beyond Orchard's client: ``proxy_url`` (``ORCHARD_PROXY_URL``) and
    ``admin_token`` (``ORCHARD_ADMIN_TOKEN``) reach the recording proxy's
    episode API for :meth:`start_episode`.
    """

    def __init__(self, base_url: str | None = None, timeout: int = 1200, auto_cleanup: bool = True,
                 api_key: str | None = None, prefix: str | None = None, *, max_retries: int = 3,
                 retry_delay: float = 1.0, proxy_url: str | None = None, admin_token: str | None = None):
        self.base_url = (base_url or _env("SANDBOX_BASE_URL", "ORCHARD_ENVD_URL") or "http://localhost:8000").rstrip("/")
        self.timeout = timeout
        self.api_key = api_key or _env("SANDBOX_API_KEY", "ORCHARD_ENVD_TOKEN")
        self.prefix = prefix or _env("SANDBOX_PREFIX", "ORCHARD_SANDBOX_PREFIX")
        headers = {"X-API-Key": self.api_key, "Authorization": "Bearer " + self.api_key} if self.api_key else {}
        self._transport = Transport(self.base_url, headers, timeout, max_retries, retry_delay)
        self._episodes = EpisodeAPI(proxy_url or _env("ORCHARD_PROXY_URL"), admin_token or _env("ORCHARD_ADMIN_TOKEN"),
                                    timeout, max_retries, retry_delay)
        self._created_sandboxes: set[str] = set()
        self._auto_cleanup = auto_cleanup
        if auto_cleanup:
            _cleanup.register()

    @property
    def max_retries(self) -> int:
        return self._transport.max_retries

    @max_retries.setter
    def max_retries(self, n: int) -> None:
        self._transport.max_retries = self._episodes.transport.max_retries = max(1, n)

    @property
    def retry_delay(self) -> float:
        return self._transport.retry_delay

    @retry_delay.setter
    def retry_delay(self, d: float) -> None:
        self._transport.retry_delay = self._episodes.transport.retry_delay = d

    def _request(self, method: str, path: str, json: Any = None, params: dict[str, Any] | None = None,
                 timeout: float | None = None, ok: tuple[int, ...] = ()) -> Any:
        return self._transport.request(method, path, json, params, timeout, ok)

    def _forget(self, sandbox_id: str) -> None:
        self._created_sandboxes.discard(sandbox_id)
        _cleanup.untrack(self.base_url, sandbox_id, self.api_key)

    def create_sandbox(self, image: str, block_network: bool = True, sandbox_id: str | None = None,
                       cpu: str | None = None, memory: str | None = None, timeout: int | None = None,
                       wait_ready: bool = True, poll_interval: float = 1.0) -> SandboxInstance:
        """Create a sandbox; it is ready when this returns.

        ``image`` is what the server's backend runs: ``"default"`` (or a
        root filesystem directory) on envd's local backend, a container
        image on Kubernetes. ``block_network`` gives the sandbox no network.
        """
        if self.prefix and not (sandbox_id and sandbox_id.startswith(f"{self.prefix}-")):
            sandbox_id = f"{self.prefix}-{sandbox_id or uuid.uuid4().hex[:8]}"
        payload: dict[str, Any] = {"image": image, "block_network": block_network}
        for key, value in (("sandbox_id", sandbox_id), ("cpu", cpu), ("memory", memory), ("timeout", timeout)):
            if value:
                payload[key] = value
        res = self._request("POST", "/sandboxes", json=payload, timeout=(timeout or 3600) + 30)
        sid = res["sandbox_id"]
        self._created_sandboxes.add(sid)
        if self._auto_cleanup:
            _cleanup.track(self.base_url, sid, self.api_key)
        if wait_ready and not (res.get("ready") or res.get("status") == "ready"):
            res = self._request("GET", f"/sandboxes/{sid}/wait", params={"timeout": res.get("timeout", 3600)})
        return SandboxInstance(self, sid, res)

    def get_sandbox(self, sandbox_id: str) -> SandboxInstance:
        res = self._request("GET", f"/sandboxes/{sandbox_id}")
        return SandboxInstance(self, res["sandbox_id"], res)

    def delete_sandbox(self, sandbox_id: str) -> None:
        """Delete a sandbox by id; errors are ignored, as in Orchard's client."""
        self._forget(sandbox_id)
        try:
            self._request("DELETE", f"/sandboxes/{sandbox_id}")
        except Exception:  # noqa: BLE001
            pass

    def cleanup_all(self) -> None:
        """Delete every sandbox this client created and has not deleted."""
        for sid in list(self._created_sandboxes):
            self.delete_sandbox(sid)

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/health")

    def start_episode(self, task_id: str, group_id: str | None = None, metadata: dict[str, Any] | None = None,
                      episode_id: str | None = None) -> Episode:
        """Open an episode on the recording proxy.

        Put ``episode.env`` into the harness's environment (for example
        ``sandbox.exec(cmd, env=episode.env)``): its model calls are then
        recorded under the episode.
        """
        return self._episodes.start(task_id, group_id, metadata, episode_id)

    def close(self) -> None:
        """Release the client (sandboxes stay; see :meth:`cleanup_all`)."""

    def __enter__(self) -> "SandboxClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SandboxClient(base_url={self.base_url})"


__all__ = ["APIError", "ExecEvent", "JobResult", "SandboxClient", "SandboxInstance"]
