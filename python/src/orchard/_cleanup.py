"""Delete sandboxes left behind when the program exits or is signalled."""

from __future__ import annotations

import atexit
import signal
import sys
import threading
import urllib.request

#: (base_url, sandbox_id, api_key) of every live sandbox a client made.
_pending: set[tuple[str, str, str | None]] = set()
_lock = threading.Lock()
_registered = False


def track(base_url: str, sandbox_id: str, api_key: str | None) -> None:
    with _lock:
        _pending.add((base_url, sandbox_id, api_key))


def untrack(base_url: str, sandbox_id: str, api_key: str | None) -> None:
    with _lock:
        _pending.discard((base_url, sandbox_id, api_key))


def cleanup_pending() -> None:
    """Delete every tracked sandbox (best effort, 5 s each)."""
    with _lock:
        items = list(_pending)
        _pending.clear()
    if items:
        print(f"[Cleanup] Deleting {len(items)} sandbox(es) on exit...", file=sys.stderr)
    for base_url, sandbox_id, api_key in items:
        headers = {"X-API-Key": api_key} if api_key else {}
        req = urllib.request.Request(f"{base_url}/sandboxes/{sandbox_id}", method="DELETE", headers=headers)
        try:
            urllib.request.urlopen(req, timeout=5).close()
        except Exception:  # noqa: BLE001 - best effort, like Orchard's client
            pass


def register() -> None:
    """Install the atexit and SIGINT/SIGTERM handlers once per process.

    A signal handler deletes the sandboxes, then runs the handler that was
    there before (or the default action, which ends the process).
    """
    global _registered
    with _lock:
        if _registered:
            return
        _registered = True
    atexit.register(cleanup_pending)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous = signal.getsignal(sig)
            signal.signal(sig, _handler(previous))
        except (OSError, ValueError):
            pass


def _handler(previous):
    def handle(signum, frame):
        cleanup_pending()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
    return handle
