"""The operator routes in the HTTP client (dormant.http.operator): listing, counts, attention, resume, terminate,
delete, pause and unpause, kept versions, fork and reset, an actor's inbox, and firing its next timer (`dormant
dev` only).

Mixed into HttpClient and HttpActorHandle; every call needs the inspector token (or a dev-mode server).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from dormant.core.cursors import every_result, every_summary
from dormant.models import (
    ActorCounts,
    AttentionList,
    Inbox,
    KeptVersion,
    OperationPage,
    OperationResult,
    ValueCheck,
)
from dormant.ports import ActorPage, ActorSummary, VersionInfo
from dormant.workflow.history import WorkflowState

Request = Callable[..., Awaitable[httpx.Response]]


class _Requests(Protocol):
    @property
    def request(self) -> Request: ...


class OperatorCalls:
    """HttpClient's operator methods (over its `request`)."""

    request: Request

    async def list_actors(self, actor_type: str, *, status: WorkflowState | str | None = None,
                          limit: int = 100, cursor: str | None = None, where: Sequence[str] | None = None) -> ActorPage:
        """One page of the actors of a type (optionally in one status); pass `cursor` on for the next. With `where`
        (search conditions such as `"customer=42"`), the actors whose search attributes satisfy all of them."""
        params = {**_listing_params(status, limit, cursor), **_where(where)}
        response = await self.request("GET", f"/actors/{quote(actor_type, safe='')}", params=params, idempotent=True)
        body = response.json()
        return ActorPage(actors=[ActorSummary.model_validate(a) for a in body["actors"]], cursor=body["cursor"])

    async def actors(self, actor_type: str, *, status: WorkflowState | str | None = None,
                     page_size: int = 100, where: Sequence[str] | None = None) -> AsyncGenerator[ActorSummary, None]:
        """Every actor of a type (optionally in one status, optionally matching `where`), page after page."""
        async for summary in every_summary(lambda cursor: self.list_actors(
                actor_type, status=status, limit=page_size, cursor=cursor, where=where)):
            yield summary

    async def counts(self, actor_type: str, *, limit: int = 1000, where: Sequence[str] | None = None) -> ActorCounts:
        """How many actors of the type are listed in each status (each counted up to `limit`); with `where`, how many
        of those matching it (the first `limit` matches are counted)."""
        response = await self.request("GET", f"/actors/{quote(actor_type, safe='')}/counts",
                                      params={"limit": limit, **_where(where)}, idempotent=True)
        return ActorCounts.model_validate(response.json())

    async def attention(self, actor_type: str, *, limit: int = 20) -> AttentionList:
        """The actors of the type that need an operator: failed first, then diverged, rolling back, retrying."""
        response = await self.request("GET", f"/actors/{quote(actor_type, safe='')}/attention",
                                      params={"limit": limit}, idempotent=True)
        return AttentionList.model_validate(response.json())

    async def resume_page(self, actor_type: str, *, status: WorkflowState | str | None = None,
                          limit: int = 25, cursor: str | None = None) -> OperationPage:
        """Resume one page of a listing (the server reports each actor's outcome)."""
        response = await self.request("POST", f"/actors/{quote(actor_type, safe='')}/resume",
                                      params=_listing_params(status, limit, cursor), idempotent=False)
        return OperationPage.model_validate(response.json())

    async def resume_all(self, actor_type: str, *, status: WorkflowState | str | None = None,
                         page_size: int = 25) -> list[OperationResult]:
        return await every_result(lambda cursor: self.resume_page(actor_type, status=status, limit=page_size,
                                                                cursor=cursor))

    async def pause_page(self, actor_type: str, *, status: WorkflowState | str | None = None, limit: int = 25,
                         cursor: str | None = None, reason: str | None = None) -> OperationPage:
        """Pause one page of a listing (without `status`, its finished actors are left out)."""
        response = await self.request("POST", f"/actors/{quote(actor_type, safe='')}/pause",
                                      params=_listing_params(status, limit, cursor), json=_reason(reason),
                                      idempotent=True)
        return OperationPage.model_validate(response.json())

    async def pause_all(self, actor_type: str, *, status: WorkflowState | str | None = None,
                        reason: str | None = None, page_size: int = 25) -> list[OperationResult]:
        """Pause every live actor of a type (or those in `status`); refusals are reported per actor."""
        return await every_result(lambda cursor: self.pause_page(actor_type, status=status, limit=page_size,
                                                               cursor=cursor, reason=reason))

    async def unpause_page(self, actor_type: str, *, limit: int = 25, cursor: str | None = None) -> OperationPage:
        """Unpause one page of the type's paused actors."""
        response = await self.request("POST", f"/actors/{quote(actor_type, safe='')}/unpause",
                                      params=_listing_params(None, limit, cursor), idempotent=True)
        return OperationPage.model_validate(response.json())

    async def unpause_all(self, actor_type: str, *, page_size: int = 25) -> list[OperationResult]:
        """Unpause every paused actor of a type; each is woken."""
        return await every_result(lambda cursor: self.unpause_page(actor_type, limit=page_size, cursor=cursor))


class HandleOperatorCalls:
    """HttpActorHandle's operator methods (over its client's `request`); they never create the actor."""

    _client: _Requests
    _created: bool
    path: str

    async def resume(self) -> OperationResult:
        """Resume a diverged actor (after a fix) or retry a failed one from its failed step; wake any other."""
        response = await self._client.request("POST", f"{self.path}/resume", idempotent=True)
        return OperationResult.model_validate(response.json())

    async def terminate(self, reason: str | None = None) -> OperationResult:
        """End the workflow as `terminated`; later sends raise ActorFinishedError."""
        body = {"reason": reason} if reason else {}
        response = await self._client.request("POST", f"{self.path}/terminate", json=body, idempotent=True)
        return OperationResult.model_validate(response.json())

    async def inbox(self, *, limit: int = 100) -> Inbox:
        """The messages waiting in the actor's inbox (queue messages, scheduled actions), in send order."""
        response = await self._client.request("GET", f"{self.path}/inbox", params={"limit": limit}, idempotent=True)
        return Inbox.model_validate(response.json())

    async def fire_timer(self) -> OperationResult:
        """Fire the actor's next timer now (a server under `dormant dev` only: elsewhere the route is 404)."""
        response = await self._client.request("POST", f"{self.path}/fire-timer", idempotent=False)
        return OperationResult.model_validate(response.json())

    async def pause(self, reason: str | None = None) -> OperationResult:
        """Hold the actor: no wake-up runs it until `unpause()`; sends are kept, actions refused."""
        response = await self._client.request("POST", f"{self.path}/pause", json=_reason(reason), idempotent=True)
        return OperationResult.model_validate(response.json())

    async def unpause(self) -> OperationResult:
        """Let a paused actor run again: woken now."""
        response = await self._client.request("POST", f"{self.path}/unpause", idempotent=True)
        return OperationResult.model_validate(response.json())

    async def check_values(self, *, repair: bool = False) -> ValueCheck:
        """Its values kept in S3 checked against the bucket; with `repair`, repaired (`dormant doctor`)."""
        if repair:
            response = await self._client.request("POST", f"{self.path}/values/repair", idempotent=True)
        else:
            response = await self._client.request("GET", f"{self.path}/values", idempotent=True)
        return ValueCheck.model_validate(response.json())

    async def versions(self) -> list[VersionInfo]:
        """The versions a fork or reset can start from, oldest first."""
        response = await self._client.request("GET", f"{self.path}/versions", idempotent=True)
        return [VersionInfo.model_validate(v) for v in response.json()["versions"]]

    async def version(self, version: int) -> KeptVersion:
        """The actor as it was at a kept version."""
        response = await self._client.request("GET", f"{self.path}/versions/{int(version)}", idempotent=True)
        return KeptVersion.model_validate(response.json())

    async def fork(self, at: int, new_key: str | Sequence[str], *, reason: str | None = None,
                   paused: bool = False) -> OperationResult:
        """A new actor `new_key` from kept version `at` (WouldDivergeError, ActorExistsError as in-process)."""
        key = [new_key] if isinstance(new_key, str) else list(new_key)
        body: dict[str, Any] = {"version": at, "key": key, "paused": paused, **_reason(reason)}
        # Not retried on its own: a fork that got through but lost its answer is refused as actor_exists.
        response = await self._client.request("POST", f"{self.path}/fork", json=body, idempotent=False)
        return OperationResult.model_validate(response.json())

    async def reset(self, to: int, *, reason: str | None = None) -> OperationResult:
        """Take the actor back to kept version `to`, in place (WouldDivergeError as in-process)."""
        body: dict[str, Any] = {"version": to, **_reason(reason)}
        response = await self._client.request("POST", f"{self.path}/reset", json=body, idempotent=False)
        return OperationResult.model_validate(response.json())

    async def delete(self) -> OperationResult:
        """Remove every item of the actor; the next request creates it afresh."""
        response = await self._client.request("DELETE", self.path, idempotent=True)
        self._created = False
        return OperationResult.model_validate(response.json())


def _where(where: Sequence[str] | None) -> dict[str, Any]:
    if isinstance(where, str):
        raise TypeError("where is a list of conditions, e.g. [\"customer=42\", \"amount>100\"]")
    return {"where": list(where)} if where else {}


def _reason(reason: str | None) -> dict[str, Any]:
    return {"reason": reason} if reason else {}


def _listing_params(status: WorkflowState | str | None, limit: int, cursor: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {"limit": limit}
    if status is not None:
        params["status"] = WorkflowState(status).value
    if cursor is not None:
        params["cursor"] = cursor
    return params
