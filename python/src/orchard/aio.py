"""Async clients: the same calls as the sync ones, run in worker threads.

Standard library only: each call runs the sync client's in
``asyncio.to_thread``, so many sandboxes can be driven concurrently from
one event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .episode import Episode
from .sandbox import JobResult, SandboxClient, SandboxInstance


class AsyncSandboxInstance:
    """Async counterpart of :class:`SandboxInstance`."""

    def __init__(self, sync: SandboxInstance):
        self._sync = sync
        self.sandbox_id = sync.sandbox_id
        self.namespace = sync.namespace
        self.image = sync.image
        self.block_network = sync.block_network
        self._heartbeat_task: asyncio.Task[None] | None = None

    async def exec(self, command: str | list[str], **kwargs: Any) -> JobResult:
        return await asyncio.to_thread(self._sync.exec, command, **kwargs)

    async def get_job(self, job_id: str) -> JobResult:
        return await asyncio.to_thread(self._sync.get_job, job_id)

    async def apply_patch(self, patch: str, timeout: int = 30) -> dict[str, Any]:
        return await asyncio.to_thread(self._sync.apply_patch, patch, timeout)

    async def upload_file(self, local_path: str, remote_path: str) -> dict[str, Any]:
        return await asyncio.to_thread(self._sync.upload_file, local_path, remote_path)

    async def upload_content(self, content: bytes, remote_path: str) -> dict[str, Any]:
        return await asyncio.to_thread(self._sync.upload_content, content, remote_path)

    async def download_file(self, remote_path: str, local_path: str) -> int:
        return await asyncio.to_thread(self._sync.download_file, remote_path, local_path)

    async def download_content(self, remote_path: str) -> bytes:
        return await asyncio.to_thread(self._sync.download_content, remote_path)

    async def list_files(self, remote_path: str = "/") -> list[dict[str, Any]]:
        return await asyncio.to_thread(self._sync.list_files, remote_path)

    def start_heartbeat(self, interval: int = 60) -> None:
        if self._heartbeat_task and not self._heartbeat_task.done():
            return

        async def loop() -> None:
            while True:
                await asyncio.sleep(interval)
                try:
                    await asyncio.to_thread(self._sync.heartbeat)
                except Exception:  # noqa: BLE001 - best effort
                    pass

        self._heartbeat_task = asyncio.ensure_future(loop())

    def stop_heartbeat(self) -> None:
        if self._heartbeat_task and not self._heartbeat_task.done():
            self._heartbeat_task.cancel()
        self._heartbeat_task = None

    async def delete(self) -> None:
        self.stop_heartbeat()
        await asyncio.to_thread(self._sync.delete)

    def delete_sync(self) -> None:
        self.stop_heartbeat()
        self._sync.delete()

    async def __aenter__(self) -> "AsyncSandboxInstance":
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.delete()
        except Exception:  # noqa: BLE001 - like Orchard's client
            pass

    def __repr__(self) -> str:
        return repr(self._sync).replace("SandboxInstance", "AsyncSandboxInstance", 1)


class AsyncSandboxClient:
    """Async counterpart of :class:`SandboxClient`; same constructor."""

    def __init__(self, base_url: str | None = None, timeout: int = 1200, auto_cleanup: bool = True,
                 api_key: str | None = None, prefix: str | None = None, **kwargs: Any):
        self._sync = SandboxClient(base_url, timeout, auto_cleanup, api_key, prefix, **kwargs)
        self.base_url = self._sync.base_url
        self.api_key = self._sync.api_key
        self.prefix = self._sync.prefix

    async def create_sandbox(self, image: str, **kwargs: Any) -> AsyncSandboxInstance:
        return AsyncSandboxInstance(await asyncio.to_thread(self._sync.create_sandbox, image, **kwargs))

    async def get_sandbox(self, sandbox_id: str) -> AsyncSandboxInstance:
        return AsyncSandboxInstance(await asyncio.to_thread(self._sync.get_sandbox, sandbox_id))

    async def delete_sandbox(self, sandbox_id: str) -> None:
        await asyncio.to_thread(self._sync.delete_sandbox, sandbox_id)

    async def cleanup_all(self) -> None:
        await asyncio.to_thread(self._sync.cleanup_all)

    async def health(self) -> dict[str, Any]:
        return await asyncio.to_thread(self._sync.health)

    async def start_episode(self, task_id: str, **kwargs: Any) -> Episode:
        return await asyncio.to_thread(self._sync.start_episode, task_id, **kwargs)

    async def close(self, cleanup: bool = True) -> None:
        """Delete the sandboxes this client made (as Orchard's async client does)."""
        if cleanup and self._sync._auto_cleanup:
            await self.cleanup_all()

    async def __aenter__(self) -> "AsyncSandboxClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.close(cleanup=True)
        except Exception:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        return f"AsyncSandboxClient(base_url={self.base_url})"
