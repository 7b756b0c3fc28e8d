"""The operator routes (the caller's identity, then the operator token): list, count, resume, terminate, delete.

    GET    /actors/{actor}?status=&limit=&cursor=       a page of the actors of a type (by status, then id)
           ...&where=customer%3D42&where=...             or of those whose search attributes match (dormant.core.search)
    GET    /actors/{actor}/counts?limit=&where=          how many are listed in each status (and match)
    GET    /actors/{actor}/attention?limit=              those that need an operator, failed first
    POST   /actors/{actor}/resume?status=&limit=&cursor= resume one page of them; results per actor
    GET    /actors/{actor}/{key}/inbox?limit=            the messages waiting in its inbox
    POST   /actors/{actor}/{key}/resume                  resume one actor
    POST   /actors/{actor}/{key}/terminate               {"reason": "..."} (optional)
    POST   /actors/{actor}/{key}/fire-timer              fire its next timer now (only under `dormant dev`)
    DELETE /actors/{actor}/{key}                         every item of the actor
    POST   /actors/{actor}/{key}/pause                   {"reason": "..."} (optional): hold it (pausing.py)
    POST   /actors/{actor}/{key}/unpause                 let it run again, woken now
    POST   /actors/{actor}/pause?status=&limit=&cursor=  pause one page of a listing; results per actor
    POST   /actors/{actor}/unpause?limit=&cursor=        unpause one page of the paused ones
    GET    /actors/{actor}/{key}/values                  its values kept in S3 checked against the bucket
    POST   /actors/{actor}/{key}/values/repair           ... and repaired where their content is still there
    GET    /actors/{actor}/{key}/versions                the versions kept, which a fork or reset can start from
    GET    /actors/{actor}/{key}/versions/{version}      the actor as it was at one of them
    POST   /actors/{actor}/{key}/fork                    {"version": V, "key": [...], "reason"?, "paused"?}
    POST   /actors/{actor}/{key}/reset                   {"version": V, "reason"?}

Cursors are opaque (base64url of the listing key); a cursor that this listing did not hand out is 400
`invalid_cursor`. The logic is dormant.runtime.operations; docs/http-api.md and docs/operations.md tell more.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from fastapi import APIRouter, Path, Query, Request
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dormant.actor import Registry
from dormant.errors import InvalidCursorError, StillDivergedError
from dormant.http.errors import ApiError, ErrorBody
from dormant.http.keys import decode_key, encode_key
from dormant.models import (
    ActorCounts,
    AttentionActor,
    AttentionList,
    Inbox,
    KeptVersion,
    OperationPage,
    OperationResult,
    ValueCheck,
)
from dormant.ports import ActorRef, ActorSummary, VersionInfo
from dormant.runtime.operations import Operator
from dormant.runtime.search import match_counts, search_actors
from dormant.runtime.service import ActorService
from dormant.runtime.timers import fire_next_timer
from dormant.workflow.caller import Caller
from dormant.workflow.history import WorkflowState

ListedStatus = Literal["pending", "sleeping", "completed", "failed", "diverged", "rolling_back", "terminated",
                       "paused"]
MAX_CURSOR = 3072  # base64 of a search's cursor: an attribute, an index key (529 bytes) and an actor id (1,011)
MAX_OPERATOR_BODY = 4096
GetService = Callable[[], Awaitable[ActorService]]
WHERE = ("A search condition on a declared search attribute, repeatable (all must hold): `name=value`, `name<value`, "
         "`<=`, `>`, `>=`, or `name^=prefix` (strings); e.g. customer=42, amount>100, due<2026-01-01T00:00:00Z")
Authorize = Callable[[Request], Awaitable[Caller]]  # async: the operator token may be read from SSM


class ListedActor(ActorSummary):
    segment: str = Field(description="The key as a path segment: /actors/{name}/{segment}/...")


class ActorList(BaseModel):
    actors: list[ListedActor]
    cursor: str | None = Field(None, description="Pass as `cursor` for the next page; null: this was the last")


class ListedAttention(AttentionActor):
    segment: str = Field(description="The key as a path segment: /actors/{name}/{segment}/...")


class AttentionPageBody(AttentionList):
    actors: list[ListedAttention]  # type: ignore[assignment]  # (each with its segment)


class TerminateBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # strict: `true` is not version 1, nor "yes" a flag
    reason: str | None = Field(None, min_length=1, max_length=500)


class ForkBody(TerminateBody):
    version: int = Field(ge=1, description="The kept version to fork at (GET .../versions lists them)")
    key: list[str] = Field(min_length=1, description="The new actor's key (its parts)")
    paused: bool = Field(False, description="Leave the new actor paused instead of waking it")


class ResetBody(TerminateBody):
    version: int = Field(ge=1, description="The kept version to go back to (GET .../versions lists them)")


class VersionList(BaseModel):
    versions: list[VersionInfo] = Field(description="Oldest first; the last is the current version")


def encode_cursor(cursor: str | None) -> str | None:
    return None if cursor is None else base64.urlsafe_b64encode(cursor.encode()).decode().rstrip("=")


def decode_cursor(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        if len(text) > MAX_CURSOR:
            raise ValueError("too long")
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("utf-8")
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidCursorError("the cursor is not one a listing handed out (pass back `cursor` unchanged)") from None


def _status(value: ListedStatus | None) -> WorkflowState | None:
    return WorkflowState(value) if value is not None else None


Body = TypeVar("Body", bound=BaseModel)
REASON_ONLY = '{"reason": "<1 to 500 characters>"} or empty'


async def _body(request: Request, model: type[Body], shape: str, *, required: bool = False) -> Body | None:
    """The small JSON body of an operator route as `model`; 422 naming the field (never the value) otherwise."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_OPERATOR_BODY:
            raise ApiError(413, "payload_too_large", f"the body is over the limit of {MAX_OPERATOR_BODY} bytes")
    if not body.strip() and not required:
        return None
    try:
        return model.model_validate(json.loads(bytes(body)))
    except (ValueError, RecursionError):
        raise ApiError(422, "invalid_request", f"the body must be {shape}",
                       detail=_errors(model, bytes(body))) from None


async def _reason(request: Request) -> str | None:
    parsed = await _body(request, TerminateBody, REASON_ONLY)
    return parsed.reason if parsed is not None else None


def _errors(model: type[BaseModel], body: bytes) -> Any:
    try:
        model.model_validate_json(body)
    except ValidationError as error:
        return error.errors(include_url=False, include_input=False, include_context=False)
    return None


def operator_router(registry: Registry, get_service: GetService, authorize: Authorize, *,
                    dev: bool = False) -> APIRouter:
    """The operator routes over the app's service; `authorize` raises unless the request may operate. `dev` adds
    the route that fires an actor's next timer (`dormant dev` only: elsewhere it does not exist, 404)."""
    router = APIRouter(tags=["operator"], responses={
        400: {"model": ErrorBody, "description": "Bad key or cursor"},
        401: {"model": ErrorBody, "description": "Missing or wrong bearer token (DORMANT_INSPECTOR_TOKEN)"},
        404: {"model": ErrorBody, "description": "Unknown actor type, or no such actor"}})

    async def operator(request: Request) -> Operator:
        await authorize(request)
        return Operator(await get_service())

    def ref(actor: str, key: str) -> ActorRef:
        registry.get(actor)  # UnknownActorError -> 404
        return ActorRef(name=actor, key=decode_key(key))  # InvalidKeyError -> 400

    @router.get("/actors/{actor}", response_model=ActorList, summary="List the actors of a type, or search them",
                operation_id="operator-list-actors")
    async def list_actors(request: Request, actor: str, status: ListedStatus | None = None,
                          limit: int = Query(50, ge=1, le=500), cursor: str | None = None,
                          where: list[str] | None = Query(None, description=WHERE)) -> ActorList:
        """By listed status, then id. `running` is never listed: an actor runs only inside a wake-up, whose last
        commit records where it rests (the listing it had while a wake-up is under way). With `where`, only the
        actors whose search attributes satisfy every condition, ordered by the value of the attribute the search index
        reads, each with its `attributes`; 400 `invalid_where` names a condition it cannot read (by position)."""
        ops = await operator(request)
        if where:
            page = await search_actors(ops.host, actor, where, status=_status(status), limit=limit,
                                       cursor=decode_cursor(cursor))
        else:
            page = await ops.list_actors(actor, status=_status(status), limit=limit, cursor=decode_cursor(cursor))
        return ActorList(actors=[ListedActor(**s.model_dump(), segment=encode_key(s.key)) for s in page.actors],
                         cursor=encode_cursor(page.cursor))

    @router.get("/actors/{actor}/counts", response_model=ActorCounts, summary="Count the actors of a type per status",
                operation_id="operator-count-actors")
    async def counts(request: Request, actor: str, limit: int = Query(1000, ge=1, le=10000),
                     where: list[str] | None = Query(None, description=WHERE)) -> ActorCounts:
        """Per listed status, counted up to `limit` (`exact` false beyond it). DynamoDB: one Select=COUNT Query of
        the status index per status and 1 MB of status items. With `where`, the matches per status: the first
        `limit` matches are counted (one Query of the search index per 1 MB of them)."""
        ops = await operator(request)
        if where:
            return await match_counts(ops.host, actor, where, limit=limit)
        return await ops.counts(actor, limit=limit)

    @router.get("/actors/{actor}/attention", response_model=AttentionPageBody,
                summary="The actors of a type that need an operator", operation_id="operator-attention")
    async def attention(request: Request, actor: str, limit: int = Query(20, ge=1, le=100)) -> AttentionPageBody:
        """Failed, diverged and rolling-back actors (by listing), then those retrying a step or whose last wake-up
        failed (confirmed on the actor), at most `limit` per group; `truncated` when a group had more."""
        ops = await operator(request)
        found = await ops.attention(actor, limit=limit)
        return AttentionPageBody(truncated=found.truncated, actors=[
            ListedAttention(**a.model_dump(), segment=encode_key(tuple(a.key))) for a in found.actors])

    @router.get("/actors/{actor}/{key}/inbox", response_model=Inbox, summary="The messages waiting in an inbox",
                operation_id="operator-inbox")
    async def inbox(request: Request, actor: str, key: str, limit: int = Query(100, ge=1, le=1000)) -> Inbox:
        """In send order: queue messages not consumed yet and actions scheduled for later, each with its id, size
        and the start of its body."""
        ops = await operator(request)  # who is calling and the token first: a stranger learns nothing
        target = ref(actor, key)
        return await ops.inbox(target, limit=limit)

    @router.post("/actors/{actor}/resume", response_model=OperationPage, summary="Resume a page of actors",
                 operation_id="operator-resume-page")
    async def resume_page(request: Request, actor: str, status: ListedStatus | None = None,
                          limit: int = Query(25, ge=1, le=100), cursor: str | None = None) -> OperationPage:
        """Resume the actors of one listing page (as POST .../{key}/resume each); pass `cursor` for the next."""
        ops = await operator(request)
        page = await ops.resume_page(actor, status=_status(status), limit=limit, cursor=decode_cursor(cursor))
        return OperationPage(results=page.results, cursor=encode_cursor(page.cursor))

    @router.post("/actors/{actor}/{key}/resume", response_model=OperationResult, summary="Resume one actor",
                 operation_id="operator-resume", responses={409: {"model": ErrorBody, "description":
                     "still_diverged (detail: the divergence), not_resumable or actor_finished"}})
    async def resume(request: Request, actor: str, key: str) -> OperationResult:
        """Diverged: replays its history against this code, then wakes it (409 still_diverged with the diff if
        the code still diverges). Failed: its failed steps run again with a fresh attempt count. Else: woken."""
        ops = await operator(request)  # who is calling and the token first: a stranger learns nothing
        target = ref(actor, key)
        try:
            return await ops.resume(target)
        except StillDivergedError as error:
            raise ApiError(409, "still_diverged", str(error), detail=error.divergence) from None

    @router.post("/actors/{actor}/{key}/terminate", response_model=OperationResult, summary="Terminate one actor",
                 operation_id="operator-terminate")
    async def terminate(request: Request, actor: str, key: str) -> OperationResult:
        """The workflow ends as `terminated` (body: optional `{"reason": "..."}`); later sends answer 409."""
        ops = await operator(request)  # who is calling and the token first: a stranger learns nothing
        target = ref(actor, key)
        return await ops.terminate(target, await _reason(request))

    if dev:
        @router.post("/actors/{actor}/{key}/fire-timer", response_model=OperationResult,
                     summary="Fire the actor's next timer now (dormant dev only)", operation_id="operator-fire-timer",
                     responses={409: {"model": ErrorBody, "description": "no_timer, or actor_finished"}})
        async def fire_timer(request: Request, actor: str, key: str) -> OperationResult:
            """Its earliest deadline (a sleep, a queue wait's timeout, a retry, a scheduled action) moves to now and
            the actor is woken: the workflow sees it reached, and replays agree (docs/dev-stack.md)."""
            await authorize(request)
            target = ref(actor, key)
            return await fire_next_timer(await get_service(), target)

    async def operating(request: Request) -> tuple[Operator, str]:
        """The operator actions and who is asking (recorded by pause, fork and reset)."""
        caller = await authorize(request)
        return Operator(await get_service()), str(caller)

    @router.post("/actors/{actor}/{key}/pause", response_model=OperationResult, summary="Pause one actor",
                 operation_id="operator-pause", responses={409: {"model": ErrorBody, "description": "actor_finished"}})
    async def pause(request: Request, actor: str, key: str) -> OperationResult:
        """No wake-up runs it until it is unpaused: sends are stored and wait, timers keep their deadlines,
        actions are refused (409 actor_paused). Body: optional `{"reason": "..."}`; who asked is recorded."""
        ops, by = await operating(request)
        target = ref(actor, key)
        return await ops.pause(target, await _reason(request), by=by)

    @router.post("/actors/{actor}/{key}/unpause", response_model=OperationResult, summary="Unpause one actor",
                 operation_id="operator-unpause")
    async def unpause(request: Request, actor: str, key: str) -> OperationResult:
        """Back to the state the pause left, woken now: waiting messages run, due timers fire."""
        ops, by = await operating(request)
        target = ref(actor, key)
        await _reason(request)  # (checked like the others; an unpause keeps no reason)
        return await ops.unpause(target, by=by)

    @router.post("/actors/{actor}/pause", response_model=OperationPage, summary="Pause a page of actors",
                 operation_id="operator-pause-page")
    async def pause_page(request: Request, actor: str, status: ListedStatus | None = None,
                         limit: int = Query(25, ge=1, le=100), cursor: str | None = None) -> OperationPage:
        """Pause the actors of one listing page (without `status`, finished ones are left out)."""
        ops, by = await operating(request)
        reason = await _reason(request)
        page = await ops.pause_page(actor, status=_status(status), limit=limit, cursor=decode_cursor(cursor),
                                    reason=reason, by=by)
        return OperationPage(results=page.results, cursor=encode_cursor(page.cursor))

    @router.post("/actors/{actor}/unpause", response_model=OperationPage, summary="Unpause a page of actors",
                 operation_id="operator-unpause-page")
    async def unpause_page(request: Request, actor: str, limit: int = Query(25, ge=1, le=100),
                           cursor: str | None = None) -> OperationPage:
        """Unpause one page of the type's paused actors (the listing of `paused`)."""
        ops, by = await operating(request)
        page = await ops.unpause_page(actor, limit=limit, cursor=decode_cursor(cursor), by=by)
        return OperationPage(results=page.results, cursor=encode_cursor(page.cursor))

    @router.get("/actors/{actor}/{key}/values", response_model=ValueCheck,
                summary="Check the values an actor keeps in S3", operation_id="operator-check-values")
    async def check_values(request: Request, actor: str, key: str) -> ValueCheck:
        """Every reference the actor's kept versions and pending messages hold to values kept in S3, checked against
        the bucket (`dormant doctor`; docs/operations.md, "Lost values"). Reads only: it works on an actor that no
        longer loads."""
        ops = await operator(request)
        return await ops.check_values(ref(actor, key))

    @router.post("/actors/{actor}/{key}/values/repair", response_model=ValueCheck,
                 summary="Repair the values an actor keeps in S3", operation_id="operator-repair-values")
    async def repair_values(request: Request, actor: str, key: str) -> ValueCheck:
        """Restore each missing object whose content another object still holds; take a pending message whose body
        is lost out of the inbox; if values of the live version are lost, put markers in their place and mark the
        actor failed (`dormant doctor --repair`). Safe to repeat."""
        ops, _ = await operating(request)
        return await ops.check_values(ref(actor, key), repair=True)

    @router.get("/actors/{actor}/{key}/versions", response_model=VersionList, summary="The versions kept",
                operation_id="operator-versions")
    async def versions(request: Request, actor: str, key: str) -> VersionList:
        """The versions a fork or reset can start from: the oldest snapshot still in the actor's commit ring and
        every version after it (docs/storage.md, "Kept versions"), each with its status and what its commit did."""
        ops = await operator(request)
        target = ref(actor, key)
        return VersionList(versions=await ops.versions(target))

    @router.get("/actors/{actor}/{key}/versions/{version}", response_model=KeptVersion,
                summary="The actor at a kept version", operation_id="operator-version",
                responses={409: {"model": ErrorBody, "description": "version_not_retained"}})
    async def version(request: Request, actor: str, key: str, version: int = Path(ge=1)) -> KeptVersion:
        """Its state, workflow record and live history as they were at that version."""
        ops = await operator(request)
        target = ref(actor, key)
        return await ops.version(target, version)

    @router.post("/actors/{actor}/{key}/fork", response_model=OperationResult, summary="Fork an actor",
                 operation_id="operator-fork", responses={409: {"model": ErrorBody, "description":
                     "would_diverge (detail: the divergence), actor_exists or version_not_retained"}})
    async def fork(request: Request, actor: str, key: str) -> OperationResult:
        """A new actor (`key`) from a kept version of this one: its input, state, history and record, replayed
        against this code first; then woken (or left paused). Its inbox starts empty."""
        ops, by = await operating(request)
        target = ref(actor, key)
        body = await _body(request, ForkBody, '{"version": <n>, "key": ["<part>", ...], "reason"?, "paused"?}',
                           required=True)
        assert body is not None
        return await ops.fork(target, body.version, body.key, reason=body.reason, by=by, paused=body.paused)

    @router.post("/actors/{actor}/{key}/reset", response_model=OperationResult, summary="Reset an actor",
                 operation_id="operator-reset", responses={409: {"model": ErrorBody, "description":
                     "would_diverge (detail: the divergence) or version_not_retained"}})
    async def reset(request: Request, actor: str, key: str) -> OperationResult:
        """Its history, state and record taken back to a kept version, in place (replayed against this code
        first); who and why are kept on its record. Messages received since are not given back (listed)."""
        ops, by = await operating(request)
        target = ref(actor, key)
        body = await _body(request, ResetBody, '{"version": <n>, "reason"?}', required=True)
        assert body is not None
        return await ops.reset(target, body.version, reason=body.reason, by=by)

    @router.delete("/actors/{actor}/{key}", response_model=OperationResult, summary="Delete one actor",
                   operation_id="operator-delete")
    async def delete(request: Request, actor: str, key: str) -> OperationResult:
        """Every item of the actor is removed (safe to repeat: `not_found` then); a later request starts afresh."""
        ops = await operator(request)  # who is calling and the token first: a stranger learns nothing
        target = ref(actor, key)
        return await ops.delete(target)

    return router


def merge_openapi(document: dict[str, Any], router: APIRouter, *, title: str, version: str) -> dict[str, Any]:
    """Add the router's routes (FastAPI's own OpenAPI of them) to the registry-generated document."""
    extra = get_openapi(title=title, version=version, routes=router.routes)
    for path, operations in extra.get("paths", {}).items():
        for operation in operations.values():
            operation["security"] = [{"bearer": []}]
        document["paths"].setdefault(path, {}).update(operations)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in extra.get("components", {}).get("schemas", {}).items():
        schemas.setdefault(name, schema)
    return document
