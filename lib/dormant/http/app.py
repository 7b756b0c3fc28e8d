"""The HTTP API: `create_app(registry, settings)` -> a FastAPI app over an ActorService.

Served by the API Lambda through Mangum (functions/api/handler.py) and by uvicorn locally. The URL
scheme, every route, the error format and auth are described in docs/http-api.md. Routes are
generic over actor, queue and action names; the OpenAPI document lists each of them with the
actors' own models (dormant.http.openapi).

Every route checks everything it can (the caller's identity, actor, key, queue or action, the actor's
authorization hook, token, body size, JSON, body schema, action arity) before the service writes anything, so
a refused request changes nothing. Reads never create an actor: they answer 404 `actor_not_found` for one
that does not exist. Who the caller is comes from the request context API Gateway verified
(dormant.http.identity); operator routes need that identity and the operator token (dormant.http.credentials).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI, Header, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dormant.actor import ActorDefinition, Registry
from dormant.core.limits import HTTP_MESSAGE_ID
from dormant.core.search import TYPE_NAMES
from dormant.errors import (
    ActorExistsError,
)
from dormant.http.actions import call_action, check_operation
from dormant.http.bodies import read_json
from dormant.http.callbacks import PATHS as CALLBACK_PATHS
from dormant.http.callbacks import callback_router
from dormant.http.callbacks import request_schemas as callback_schemas
from dormant.http.credentials import TokenSource, require_operator, token_source
from dormant.http.errors import ApiError, install_error_handlers
from dormant.http.identity import request_caller
from dormant.http.inspector import workflow_history
from dormant.http.keys import decode_key, percent_decode
from dormant.http.large_responses import LargeResponses
from dormant.http.limits import WaitLimiter
from dormant.http.openapi import build_openapi
from dormant.http.operator import merge_openapi, operator_router
from dormant.http.tracing import install_tracing, spans_router
from dormant.http.ui import ui_router
from dormant.ports import ActorRef
from dormant.runtime.access import Operation
from dormant.runtime.batches import MAX_BATCH
from dormant.runtime.batches import describe as describe_batch
from dormant.runtime.callbacks import without_tokens
from dormant.runtime.offline import export_lines
from dormant.runtime.service import ActorService
from dormant.settings import Settings
from dormant.workflow.caller import Caller
from dormant.workflow.history import HistoryEntry
from dormant.workflow.values import describe_errors

ServiceFactory = Callable[[], AbstractAsyncContextManager[ActorService]]
MAX_MESSAGE_ID = HTTP_MESSAGE_ID.maximum  # dormant.core.limits
API_VERSION = "1"


class _ServiceHolder:
    """The app's ActorService: given, or opened on the first request (the AWS clients need a running loop)."""

    def __init__(self, service: ActorService | None, factory: ServiceFactory | None) -> None:
        self._service = service
        self._factory = factory
        self._stack: AsyncExitStack | None = None
        self._lock: asyncio.Lock | None = None

    async def get(self) -> ActorService:
        if self._service is not None:
            return self._service
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._service is None:
                assert self._factory is not None
                stack = AsyncExitStack()
                self._service = await stack.enter_async_context(self._factory())
                self._stack = stack
        return self._service

    async def aclose(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
            self._stack, self._service = None, None



# -- request helpers ------------------------------------------------------------------------------------
class _BatchMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    body: Any
    id: str | None = None


class _Batch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: list[_BatchMessage] = Field(min_length=1, max_length=MAX_BATCH)


class _CreateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: Any = None


def _message_id(value: str | None) -> str | None:
    if value is None:
        return None
    if not value or len(value) > MAX_MESSAGE_ID or not all("!" <= ch <= "~" for ch in value):
        raise ApiError(400, "invalid_idempotency_key",
                       f"Idempotency-Key must be 1 to {MAX_MESSAGE_ID} printable ASCII characters without spaces")
    return value


def _key_segment(request: Request, decoded: str) -> str:
    """The key's path segment as the client sent it, percent-decoded strictly.

    Servers decode the path before routing and replace escapes that are not UTF-8 by U+FFFD (`%FF` and
    `%FE` would name one actor): where the raw path is known (uvicorn), the segment is taken from it and
    decoded strictly (InvalidKeyError). Behind API Gateway (Mangum) the gateway has decoded it already."""
    raw = request.scope.get("raw_path")
    route = request.scope.get("route")
    template = getattr(route, "path", None)
    if not raw or template is None:
        return decoded
    raw_parts = bytes(raw).split(b"/")
    template_parts = str(template).split("/")
    if len(raw_parts) != len(template_parts) or "{key}" not in template_parts:
        return decoded  # a root path or an encoded '/': routing used the decoded path, so do we
    return percent_decode(raw_parts[template_parts.index("{key}")].decode("latin-1"))


def create_app(registry: Registry, settings: Settings | None = None, *, service: ActorService | None = None,
               service_factory: ServiceFactory | None = None, operator_token: TokenSource | None = None) -> FastAPI:
    """The HTTP API over `service`, or over DynamoDB + SQS from `settings` (opened on the first request).

    `operator_token` is where the operator token comes from (default: as the settings say, see
    dormant.http.operator.token_source)."""
    settings = settings or Settings()
    if service is None and service_factory is None:
        from dormant.aws.service import open_aws_service  # the deployed default; tests and dev pass their own

        def aws_factory() -> AbstractAsyncContextManager[ActorService]:
            return open_aws_service(registry, settings)

        service_factory = aws_factory
    holder = _ServiceHolder(service, service_factory)
    limit = settings.max_body_bytes
    max_wait = settings.api_max_wait
    operator_source = operator_token or token_source(settings)
    waits = WaitLimiter(settings.api_max_waits_per_caller)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await holder.aclose()

    # redirect_slashes=False: Starlette would answer `/actors/` with a 307 to an absolute URL built from the Host
    # header (an open redirect behind a proxy that passes it on); a trailing slash is a 404 like any unknown path.
    app = FastAPI(title="Dormant actors", version=API_VERSION, lifespan=lifespan, docs_url=None, redoc_url=None,
                  redirect_slashes=False,
                  description="Durable actor workflows: send to queues, call actions, read state, status, "
                              "events and history. See docs/http-api.md.")
    app.state.services = holder  # `await app.state.services.aclose()` closes clients opened on demand
    install_error_handlers(app)
    if settings.max_response_bytes is not None:
        async def blobs() -> Any:
            values = getattr((await holder.get()).store, "values", None)
            return getattr(values, "blobs", None)

        app.add_middleware(LargeResponses, limit=settings.max_response_bytes, blobs=blobs)
    install_tracing(app)  # a span per request when tracing is on (dormant.http.tracing)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = merge_openapi(
                build_openapi(registry, title=app.title, version=app.version, description=app.description),
                operator_routes, title=app.title, version=app.version)
            document = merge_openapi(document, callback_routes, title=app.title, version=app.version)
            for name, schema in callback_schemas().items():  # its body's schema, which FastAPI does not see
                document["components"]["schemas"].setdefault(name, schema)
            for path in CALLBACK_PATHS:
                for operation in document["paths"][path].values():
                    operation["security"] = []  # the token in the path is the authorization
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    # -- shared checks -------------------------------------------------------------------------------
    def resolve(request: Request, actor: str, key: str) -> tuple[ActorDefinition, ActorRef]:
        definition = registry.get(actor)  # UnknownActorError -> 404
        return definition, ActorRef(name=actor, key=decode_key(_key_segment(request, key)))  # InvalidKeyError -> 400

    async def allowed(request: Request, actor: str, key: str, operation: Operation, target: str | None = None
                      ) -> tuple[ActorDefinition, ActorRef, Caller]:
        """Authenticate (401), resolve (404/400), ask the actor's hook (403): before anything is read."""
        caller = request_caller(request, settings)
        definition, ref = resolve(request, actor, key)
        await check_operation(definition, ref, caller, operation, target)
        return definition, ref, caller

    async def authorize(request: Request) -> Caller:
        """An operator route: who is calling first (401 in iam/jwt mode without a verified identity, as on every
        route), then the operator token (docs/http-api.md, "Auth"). Returns the caller (who paused, reset...)."""
        caller = request_caller(request, settings)
        await require_operator(request, settings, operator_source)
        return caller

    async def existing(ref: ActorRef) -> ActorService:
        svc = await holder.get()
        if not await svc.store.exists(ref):
            raise ApiError(404, "actor_not_found", "the actor does not exist (PUT /actors/{actor}/{key} "
                                                   "or a send or call creates it)")
        return svc

    def capped(seconds: float | None) -> float:
        return max_wait if seconds is None else min(seconds, max_wait)

    def shown(entries: Sequence[HistoryEntry]) -> list[HistoryEntry]:
        """History as a reader sees it: callback tokens cut out, except in dev mode (docs/http-api.md)."""
        return list(entries) if settings.dev else without_tokens(entries)

    # -- routes --------------------------------------------------------------------------------------
    @app.get("/actors", include_in_schema=False)
    async def list_actors(request: Request) -> list[dict[str, Any]]:
        request_caller(request, settings)  # authenticated callers only
        return [{"name": d.name, "queues": sorted(d.queues), "actions": sorted(d.actions),
                 "events": sorted(d.events), "workflow": d.workflow_fn is not None,
                 "search": {name: TYPE_NAMES[code] for name, code in sorted(d.search.items())}}
                for d in registry.actors.values()]

    @app.put("/actors/{actor}/{key}", include_in_schema=False)
    async def get_or_create(request: Request, actor: str, key: str,
                            if_none_match: str | None = Header(None, alias="If-None-Match")) -> JSONResponse:
        _, ref, caller = await allowed(request, actor, key, "create")
        present, body = await read_json(request, limit, required=False)
        try:
            actor_input = _CreateBody.model_validate(body if present else {}).input
        except ValidationError as error:
            raise ApiError(422, "invalid_request", 'the body must be {"input": <any JSON>} or empty',
                           detail=error.errors(include_url=False, include_input=False)) from None
        created = await (await holder.get()).ensure_created(ref, actor_input, caller=caller)
        if not created and if_none_match is not None and if_none_match.strip() == "*":  # client.create
            raise ActorExistsError("the actor exists already (a PUT without If-None-Match gets it)")
        return JSONResponse({"actor": ref.name, "key": list(ref.key), "created": created},
                            status_code=201 if created else 200)

    @app.post("/actors/{actor}/{key}/queues/{queue}", include_in_schema=False)
    async def send(request: Request, actor: str, key: str, queue: str, wait: bool = False,
                   timeout: float | None = Query(None, gt=0), create: bool = True,
                   idempotency_key: str | None = Header(None, alias="Idempotency-Key")) -> JSONResponse:
        _, ref, caller = await allowed(request, actor, key, "send", queue)  # before reading the body
        message_id = _message_id(idempotency_key)
        _, body = await read_json(request, limit, required=True)
        svc = await holder.get()
        if wait:
            async with waits.hold(caller):
                result = await svc.send(ref, queue, body, wait=True, timeout=capped(timeout),
                                        message_id=message_id, sender=caller, create=create)
        else:
            result = await svc.send(ref, queue, body, message_id=message_id, sender=caller, create=create)
        payload: dict[str, Any] = {"status": result.status, "id": result.id}
        if result.status == "completed":
            payload["response"] = result.response
        if result.workflow is not None:  # failed or diverged: stored, runs once an operator resumes the actor
            payload["workflow"] = result.workflow.value
        return JSONResponse(payload, status_code=202 if result.status == "queued" else 200)

    @app.post("/actors/{actor}/{key}/queues/{queue}/batch", include_in_schema=False)
    async def send_many(request: Request, actor: str, key: str, queue: str, create: bool = True) -> JSONResponse:
        _, ref, caller = await allowed(request, actor, key, "send", queue)  # before reading the body
        _, body = await read_json(request, limit, required=True)
        try:
            batch = _Batch.model_validate(body)
        except ValidationError as error:
            raise ApiError(422, "invalid_body", f"the batch: {describe_errors(error)}") from None
        ids = [m.id for m in batch.messages if m.id is not None]
        if ids and len(ids) != len(batch.messages):
            raise ApiError(422, "invalid_body", "give an id to every message of the batch or to none")
        for message_id in ids:
            _message_id(message_id)
        svc = await holder.get()
        results = await svc.send_many(ref, queue, [m.body for m in batch.messages], message_ids=ids or None,
                                      sender=caller, create=create)
        return JSONResponse(describe_batch(results), status_code=202)

    @app.post("/actors/{actor}/{key}/actions/{action}", include_in_schema=False)
    async def call(request: Request, actor: str, key: str, action: str, create: bool = True) -> dict[str, Any]:
        definition, ref, caller = await allowed(request, actor, key, "call", action)
        present, args = await read_json(request, limit, required=False)
        return {"result": await call_action(await holder.get(), definition, ref, caller, action,
                                            args if present else [], create=create)}

    @app.get("/actors/{actor}/{key}/state", include_in_schema=False)
    async def state(request: Request, actor: str, key: str) -> Any:
        _, ref, _ = await allowed(request, actor, key, "state")
        value = await (await existing(ref)).state(ref)
        return value.model_dump(mode="json")

    @app.get("/actors/{actor}/{key}/status", include_in_schema=False)
    async def status(request: Request, actor: str, key: str, history: bool = False) -> dict[str, Any]:
        if history:  # an operator's read, like GET .../history: the token, not the actor's hook, allows it
            await authorize(request)
            _, ref = resolve(request, actor, key)
        else:
            _, ref, _ = await allowed(request, actor, key, "status")
        svc = await existing(ref)
        payload = (await svc.status(ref)).model_dump(mode="json")
        if history:
            payload["history"] = [e.model_dump(mode="json") for e in shown(await svc.history(ref))]
        return payload

    @app.get("/actors/{actor}/{key}/history", include_in_schema=False)
    async def history(request: Request, actor: str, key: str) -> list[dict[str, Any]]:
        await authorize(request)
        _, ref = resolve(request, actor, key)
        return [e.model_dump(mode="json") for e in shown(await (await existing(ref)).history(ref))]

    @app.get("/actors/{actor}/{key}/events", include_in_schema=False)
    async def events(request: Request, actor: str, key: str, after: int = Query(0, ge=0),
                     wait: float = Query(0.0, ge=0), limit: int = Query(100, ge=1, le=1000)) -> dict[str, Any]:
        _, ref, caller = await allowed(request, actor, key, "events")
        store = (await existing(ref)).store
        if wait > 0:
            async with waits.hold(caller):
                batch = await store.wait_events(ref, after, capped(wait))
        else:
            batch = await store.read_events(ref, after, limit)
        batch = [record for record in batch if record.seq > after][:limit]
        return {"events": [record.model_dump(mode="json") for record in batch],
                "cursor": batch[-1].seq if batch else after}

    @app.get("/actors/{actor}/{key}/inspector/workflow-history", include_in_schema=False)
    async def inspector_history(request: Request, actor: str, key: str) -> dict[str, Any]:
        await authorize(request)
        definition, ref = resolve(request, actor, key)
        svc = await existing(ref)
        enabled = definition.workflow_fn is not None
        current = (await svc.status(ref)).workflow.value if enabled else None
        entries = shown(await svc.history(ref)) if enabled else []
        return workflow_history(enabled=enabled, workflow_state=current, entries=entries).model_dump(mode="json")

    @app.get("/actors/{actor}/{key}/inspector/export", include_in_schema=False)
    async def inspector_export(request: Request, actor: str, key: str) -> PlainTextResponse:
        """The actor's history as JSON lines, for `dormant replay` (offline, against new code)."""
        await authorize(request)
        _, ref = resolve(request, actor, key)
        svc = await existing(ref)
        snapshot = await svc.store.load(ref)
        if snapshot is None:  # deleted between the two reads: as if it never existed
            raise ApiError(404, "actor_not_found", "the actor does not exist")
        snapshot.history = shown(snapshot.history)
        return PlainTextResponse("\n".join(export_lines(snapshot)) + "\n", media_type="application/x-ndjson")

    operator_routes = operator_router(registry, holder.get, authorize, dev=settings.dev)  # list, resume, ...
    app.include_router(operator_routes)

    callback_routes = callback_router(holder.get, limit)  # outside the callers' auth: the token
    app.include_router(callback_routes)
    app.include_router(ui_router(dev=settings.dev, title=app.title,  # /ui and /docs, from packaged files
                                 pushed=settings.dev and settings.realtime_url is not None))
    if settings.dev:
        app.include_router(spans_router())  # the dev stack's spans, for the dashboard's timeline
    return app
