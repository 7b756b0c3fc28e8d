"""One log line per HTTP request: method, path, status, duration, and the actor it addressed.

`AccessLog(app)` wraps any ASGI app (pure ASGI: no per-request task or body copy). Records go to the
`dormant.http` logger with their fields under `extra` (`http`: method, path, status, duration_ms;
`actor`, `key`), so the dev console prints them as one readable line and Lambda's JSON log format (or
powertools' Logger) turns them into JSON fields. 5xx answers log at ERROR, 4xx at INFO.

Sampling (Settings.request_log_sample, request_log_slow_ms): a successful request faster than `slow_ms` is logged
with probability `sample`; errors (4xx, 5xx) and slow requests always are. Behind API Gateway the API function
logs none of the fast successful ones by default: the stage's access log is the record of every request, and this
line would be a second one for the same request (docs/observability.md, "Logs").
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote

log = logging.getLogger("dormant.http")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def logged_path(path: str) -> str:
    """The path as logged: a callback's token (its authorization) cut out of `/callbacks/{token}[/...]`."""
    if path.startswith("/callbacks/"):
        rest = path[len("/callbacks/"):].partition("/")[2]
        return "/callbacks/<token>" + ("/" + rest if rest in ("webhook", "approve") else "")
    return path


def actor_of(path: str) -> tuple[str | None, str | None]:
    """("actor type", "encoded key") of an /actors/{actor}/{key}/... path."""
    parts = path.split("/")
    if len(parts) >= 4 and parts[1] == "actors":
        return unquote(parts[2]), unquote(parts[3])
    return None, None


class AccessLog:
    """ASGI middleware: logs each HTTP request once it has answered."""

    def __init__(self, app: ASGIApp, logger: logging.Logger = log, *, sample: float = 1.0, slow_ms: float = 1000.0,
                 sampler: Callable[[], float] = random.random) -> None:
        """`sample`: share of fast successful requests logged; `sampler` draws in [0, 1) (a test fixes it)."""
        self.app = app
        self.log = logger
        self.sample = sample
        self.slow_ms = slow_ms
        self.sampler = sampler

    def __getattr__(self, name: str) -> Any:  # the wrapped app's attributes (state, routes...) stay reachable
        return getattr(self.app, name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_and_watch(message: Message) -> None:
            nonlocal status
            if message.get("type") == "http.response.start":
                status = int(message.get("status", 500))
            await send(message)

        try:
            await self.app(scope, receive, send_and_watch)
        finally:
            self._log(scope, status, (time.perf_counter() - started) * 1000)

    def wanted(self, status: int, duration_ms: float) -> bool:
        """Whether this request gets a line: always when it failed or was slow, else as sampled."""
        if status >= 400 or duration_ms >= self.slow_ms or self.sample >= 1:
            return True
        return self.sample > 0 and self.sampler() < self.sample

    def _log(self, scope: Scope, status: int, duration_ms: float) -> None:
        level = logging.ERROR if status >= 500 else logging.INFO
        if not self.log.isEnabledFor(level) or not self.wanted(status, duration_ms):
            return
        method, path = scope.get("method", "?"), logged_path(str(scope.get("path", "?")))
        actor, key = actor_of(path)
        fields: dict[str, Any] = {"http": {"method": method, "path": path, "status": status,
                                           "duration_ms": round(duration_ms, 2)}}
        if actor is not None:
            fields.update(actor=actor, key=key)
        self.log.log(level, "%s %s -> %d in %.1f ms", method, path, status, duration_ms, extra=fields)
