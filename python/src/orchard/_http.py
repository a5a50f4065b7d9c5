"""HTTP transport: JSON over urllib, with retries and clear errors."""

from __future__ import annotations

import http.client
import json
import random
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Iterator, Mapping


class OrchardError(Exception):
    """Base class of the errors this package raises."""


class APIError(OrchardError):
    """The server answered with an HTTP error status.

    ``status_code`` is the HTTP status, ``detail`` the server's message
    (``{"detail": ...}`` or ``{"error": {"message": ...}}``), ``body`` the
    decoded JSON body when there was one.
    """

    def __init__(self, method: str, url: str, status_code: int, detail: str, body: Any = None):
        super().__init__(f"{method} {url}: HTTP {status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail
        self.body = body


class ServerUnavailable(OrchardError, ConnectionError):
    """The server could not be reached (or kept answering 503) after every retry."""


#: Errors that mean the request may not have reached the server, or its
#: answer was lost: retried with backoff.
_RETRYABLE = (ConnectionError, TimeoutError, socket.timeout, http.client.RemoteDisconnected,
              http.client.IncompleteRead, urllib.error.URLError)


class Transport:
    """One server's JSON API: base URL, auth headers, retry policy.

    A request is tried ``max_retries`` times in all. Connection failures,
    timeouts and broken answers wait ``retry_delay * 2**attempt`` seconds
    (plus jitter) before the next try; a 503 waits its ``Retry-After``.
    """

    def __init__(self, base_url: str, headers: Mapping[str, str], timeout: float,
                 max_retries: int = 3, retry_delay: float = 1.0, verbose: bool = True):
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers)
        self.timeout = timeout
        self.max_retries = max(1, max_retries)
        self.retry_delay = retry_delay
        self.verbose = verbose

    def url(self, path: str, params: Mapping[str, Any] | None = None) -> str:
        url = self.base_url + path
        if params:
            url += "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        return url

    def request(self, method: str, path: str, json_body: Any = None, params: Mapping[str, Any] | None = None,
                timeout: float | None = None, ok: tuple[int, ...] = ()) -> Any:
        """Send one JSON request and return the decoded answer.

        Statuses in ``ok`` are returned like 2xx ones; any other error
        status raises :class:`APIError`.
        """
        url = self.url(path, params)
        data = None if json_body is None else json.dumps(json_body).encode()
        last: BaseException | None = None
        for attempt in range(self.max_retries):
            final = attempt == self.max_retries - 1
            try:
                status, body = self._send(method, url, data, timeout or self.timeout)
            except _RETRYABLE as exc:
                last = exc
                if final:
                    break
                self._backoff(method, path, attempt, type(exc).__name__)
                continue
            if status == 503 and not final:
                last = APIError(method, url, status, _detail(body), body)
                self._backoff(method, path, attempt, "503 Service Unavailable")
                continue
            if status >= 400 and status not in ok:
                raise APIError(method, url, status, _detail(body), body)
            return body
        if isinstance(last, APIError):
            raise ServerUnavailable(f"{method} {url}: still 503 after {self.max_retries} attempts: {last.detail}") from last
        raise ServerUnavailable(f"{method} {url}: server unreachable after {self.max_retries} attempts: {last}") from last

    def _send(self, method: str, url: str, data: bytes | None, timeout: float) -> tuple[int, Any]:
        req = urllib.request.Request(url, data=data, method=method, headers=self.headers)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as res:
                return res.status, _decode(res.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, _decode(exc.read())

    def _backoff(self, method: str, path: str, attempt: int, why: str) -> None:
        wait = self.retry_delay * (2 ** attempt)
        wait += random.uniform(0, wait * 0.5)
        if self.verbose:
            print(f"[Retry {attempt + 1}/{self.max_retries}] {method} {path}: {why}; waiting {wait:.1f}s",
                  file=sys.stderr)
        time.sleep(wait)

    def stream(self, method: str, path: str, json_body: Any, timeout: float) -> Iterator[tuple[str, Any]]:
        """POST a request answered with server-sent events; yield (event, data)."""
        url = self.url(path)
        req = urllib.request.Request(url, data=json.dumps(json_body).encode(), method=method, headers=self.headers)
        req.add_header("Content-Type", "application/json")
        req.add_header("Accept", "text/event-stream")
        try:
            res = urllib.request.urlopen(req, timeout=timeout)
        except urllib.error.HTTPError as exc:
            with exc:
                body = _decode(exc.read())
            raise APIError(method, url, exc.code, _detail(body), body) from None
        except _RETRYABLE as exc:
            raise ServerUnavailable(f"{method} {url}: server unreachable: {exc}") from exc
        with res:
            event, data = "message", []
            for raw in res:
                line = raw.decode("utf-8").rstrip("\r\n")
                if line == "":
                    if data:
                        yield event, json.loads("\n".join(data))
                    event, data = "message", []
                elif line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip())


def _decode(raw: bytes) -> Any:
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return {"detail": raw.decode("utf-8", "replace")[:512]}


def _detail(body: Any) -> str:
    if isinstance(body, dict):
        if isinstance(body.get("detail"), str):
            return body["detail"]
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
    return json.dumps(body)[:512]
