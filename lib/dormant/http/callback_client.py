"""The callback routes in the HTTP client (dormant.http.callbacks): what an outside system does with a token.

Mixed into HttpClient: `complete_callback`, `fail_callback`, `heartbeat_callback`, `callback_status`, as on the
in-process Client. The routes need no identity and no operator token (the token is the authorization); a client
made for them needs only the API's URL: `HttpClient("https://api.example.com")`. Every one is idempotent (one
completion per callback: the same one again is answered as such), so they are retried like reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from dormant.models import CallbackStatus
from dormant.runtime.callbacks import check_token, error_parts
from dormant.workflow.execution import to_json

Request = Callable[..., Awaitable[httpx.Response]]


class CallbackCalls:
    """HttpClient's callback methods (over its `request`)."""

    request: Request

    async def _callback(self, token: str, body: Any) -> CallbackStatus:
        check_token(token)  # InvalidCallbackTokenError before any I/O (and never a token-less path)
        response = await self.request("POST", f"/callbacks/{token}", json=body, idempotent=True)
        return CallbackStatus.model_validate(response.json())

    async def complete_callback(self, token: str, result: Any = None) -> CallbackStatus:
        """Complete a callback with `result` (the server validates it against the declared model)."""
        return await self._callback(token, {"result": to_json(result, "the result")})

    async def fail_callback(self, token: str, error: str | BaseException, message: str | None = None
                            ) -> CallbackStatus:
        """Fail a callback: its `cb.result()` raises CallbackFailedError (`error`: an exception, or a type name)."""
        error_type, text = error_parts(error, message)
        return await self._callback(token, {"error": {"type": error_type, "message": text}})

    async def heartbeat_callback(self, token: str) -> CallbackStatus:
        """Move the callback's heartbeat deadline (wakes nothing)."""
        return await self._callback(token, {"heartbeat": True})

    async def callback_status(self, token: str) -> CallbackStatus:
        """Where a callback stands: open, completed, failed, timed_out, cancelled or expired."""
        check_token(token)
        response = await self.request("GET", f"/callbacks/{token}", idempotent=True)
        return CallbackStatus.model_validate(response.json())
