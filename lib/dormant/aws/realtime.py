"""Realtime connections on AWS (docs/realtime.md): the WebSocket API's routes and the worker's fan-out.

`Gateway` answers a connection's frames (the `$default` route; the protocol: dormant.core.realtime): a subscribe asks
the actor's `authorize` hook (operation `events`), stores the subscription (dormant.dynamodb.connections), then
replays the stored events after the client's cursor and says `subscribed`; an action frame goes to the `actions`
it was given (dormant.http.actions.SocketActions: the HTTP action route's own path), whose `action_result` frame is
posted back. `$disconnect` removes its subscriptions. `$connect` records who connected (`websocket_caller`: in jwt
mode from the claims the `$connect` authorizer verified, dormant.aws.authorizer).

`Broadcaster` is the worker's side: `BroadcastingStore` wraps the worker's store, and after each commit that
recorded events it posts them to the actor's subscribed connections through the API Gateway Management API
(`POST /@connections/{id}`; `dormant dev` serves the same endpoint, dormant.dev.gateway). A connection answering 410
is gone: its subscriptions are removed. The fan-out never fails or holds the wake-up: it runs beside it, each
commit's posts bounded by POST_TIMEOUT_SECONDS (abandoned past it), and the wake-up waits for what is still
running at most that long again before it returns (`flush`). At most FANOUT_LIMIT connections are pushed per
commit (the oldest subscriptions); the others are not pushed (docs/limits.md).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from pydantic import ValidationError

from dormant.actor import Registry
from dormant.core.claims import CLAIMS_CONTEXT, ClaimsRefused, caller_from_claims
from dormant.core.clients import inline_calls, open_client, open_clients
from dormant.core.realtime import (
    FANOUT_LIMIT,
    MAX_SUBSCRIPTIONS,
    POST_TIMEOUT_SECONDS,
    REPLAY_LIMIT,
    Action,
    Ping,
    Subscribe,
    action_error_frame,
    error_frame,
    event_frame,
    parse,
    subscribed_frame,
)
from dormant.core.records import ActorRef, EventRecord
from dormant.dynamodb.connections import Connections
from dormant.errors import ForbiddenError, InvalidKeyError, UnknownActorError
from dormant.ports import EventStore
from dormant.runtime.access import AccessRequest, check_access
from dormant.runtime.service import ActorService
from dormant.s3.offload import refs_in
from dormant.settings import Settings
from dormant.workflow.caller import Caller
from dormant.workflow.execution import CommitDraft

log = logging.getLogger("dormant.aws.realtime")
ServiceSource = Callable[[], Awaitable[ActorService]]

Post = Callable[[str, str], Awaitable[bool]]
"""Send a text frame to a connection; False when the connection is gone (410)."""
Actions = Callable[[Caller, Action], Awaitable[str]]
"""Answer an action frame as its caller (the HTTP action route's path: dormant.http.actions.SocketActions); the
`action_result` frame."""


class ManagementApi:
    """The API Gateway Management API client: `post` a frame, `delete` a connection."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def post(self, connection_id: str, text: str) -> bool:
        try:
            await self.client.post_to_connection(ConnectionId=connection_id, Data=text.encode())
        except Exception as error:
            if _gone(error):
                return False
            raise
        return True

    async def delete(self, connection_id: str) -> None:
        try:
            await self.client.delete_connection(ConnectionId=connection_id)
        except Exception as error:
            if not _gone(error):
                raise


def _gone(error: BaseException) -> bool:
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return False
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return bool(status == 410 or response.get("Error", {}).get("Code") == "GoneException")


class _Endpoint:
    """Client settings for the Management API: the WebSocket API's own endpoint (ClientSettings)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @property
    def aws_clients(self) -> Any:
        return self.settings.aws_clients

    def client_kwargs(self, service: str | None = None) -> dict[str, Any]:
        return {"region_name": self.settings.region, "endpoint_url": self.settings.realtime_url}


@asynccontextmanager
async def open_management(settings: Settings) -> AsyncIterator[ManagementApi]:
    """The Management API client at `settings.realtime_url` (one attempt, short timeouts: a post is best effort)."""
    async with open_client("apigatewaymanagementapi", _Endpoint(settings), attempts=1, connect_timeout=1,
                           read_timeout=POST_TIMEOUT_SECONDS) as client:
        yield ManagementApi(client)


def _frame(ref: ActorRef, record: EventRecord) -> str:
    # A payload kept in S3 is pushed as a reference the client reads over HTTP (as one too big for a frame).
    return event_frame(ref.name, ref.key, record, fetch=bool(refs_in(record.payload)))


class Broadcaster:
    """Posts committed events to the actor's subscribed connections (see the module docstring)."""

    def __init__(self, connections: Connections, post: Post, *, fanout_limit: int = FANOUT_LIMIT,
                 timeout: float = POST_TIMEOUT_SECONDS) -> None:
        self.connections = connections
        self.post = post
        self.fanout_limit = fanout_limit
        self.timeout = timeout
        self.running: set[asyncio.Task[None]] = set()
        self.pushed = 0  # frames posted
        self.dropped = 0  # gone connections removed
        self.abandoned = 0  # fan-outs cut at the timeout

    def committed(self, ref: ActorRef, version: int) -> None:
        """A commit of `ref` that recorded events became `version`: push them, beside the wake-up."""
        task = asyncio.get_running_loop().create_task(self._bounded(ref, version), name="dormant-fanout")
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def flush(self) -> None:
        """Wait for the running fan-outs (each is bounded by the timeout already)."""
        if self.running:
            await asyncio.wait(set(self.running))

    async def _bounded(self, ref: ActorRef, version: int) -> None:
        try:
            await asyncio.wait_for(self.fan_out(ref, version), self.timeout)
        except TimeoutError:
            self.abandoned += 1
            log.warning("fan-out of %s v%d cut after %.1f s", ref, version, self.timeout)
        except Exception as error:  # a push is best effort: the stored events stay the truth
            log.warning("fan-out of %s v%d failed: %r", ref, version, error)

    async def fan_out(self, ref: ActorRef, version: int) -> None:
        subscriptions = await self.connections.of_actor(ref, self.fanout_limit)
        if not subscriptions:
            return
        events = await self.connections.events_of(ref, version)
        frames = [(record.seq, _frame(ref, record)) for record in events]

        async def push(connection_id: str, after: int) -> None:
            for seq, text in frames:
                if seq <= after:
                    continue
                try:
                    alive = await self.post(connection_id, text)
                except Exception as error:  # a slow or failing endpoint: this connection misses it, others not
                    log.info("post to %s failed: %r", connection_id, error)
                    return
                if not alive:
                    self.dropped += 1
                    await self.connections.drop(connection_id)
                    return
                self.pushed += 1

        await asyncio.gather(*(push(s.connection_id, s.after) for s in subscriptions))


class BroadcastingStore:
    """EventStore wrapper: every commit that records events is pushed by the broadcaster."""

    def __init__(self, inner: EventStore, broadcaster: Broadcaster) -> None:
        self.inner = inner
        self.broadcaster = broadcaster

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit(self, ref: ActorRef, expected_version: int, draft: CommitDraft) -> int:
        version = await self.inner.commit(ref, expected_version, draft)
        if draft.events:
            self.broadcaster.committed(ref, version)
        return version


class Gateway:
    """The WebSocket API's routes over the actor service's store and registry (see the module docstring)."""

    def __init__(self, registry: Registry, store: EventStore, connections: Connections, post: Post,
                 actions: Actions | None = None) -> None:
        self.registry = registry
        self.store = store
        self.connections = connections
        self.post = post
        self.actions = actions

    async def message(self, connection_id: str, caller: Caller, text: str | bytes) -> None:
        """`$default`: one client frame; the answers are posted to the connection."""
        try:
            frame = parse(text)
        except (ValidationError, ValueError) as error:
            await self.post(connection_id, error_frame("invalid_frame", _first_error(error)))
            return
        if isinstance(frame, Ping):
            await self.post(connection_id, json.dumps({"type": "pong"}))
            return
        if isinstance(frame, Action):
            if self.actions is None:
                await self.post(connection_id, action_error_frame(frame.id, 501, "unsupported",
                                                                  "this endpoint runs no actions"))
            else:
                await self.post(connection_id, await self.actions(caller, frame))
            return
        where = {"actor": frame.actor, "key": frame.key}
        try:
            definition = self.registry.get(frame.actor)
            ref = ActorRef(name=frame.actor, key=tuple(frame.key))
            await check_access(definition.authorize_fn, AccessRequest(caller=caller, actor=ref.name, key=ref.key,
                                                                      operation="events"))
        except UnknownActorError as error:
            await self.post(connection_id, error_frame("unknown_actor", str(error), **where))
            return
        except (InvalidKeyError, ValidationError) as error:
            await self.post(connection_id, error_frame("invalid_key", str(error), **where))
            return
        except ForbiddenError as error:
            await self.post(connection_id, error_frame("forbidden", str(error), **where))
            return
        if not isinstance(frame, Subscribe):
            await self.connections.unsubscribe(ref, connection_id)
            await self.post(connection_id, json.dumps({"type": "unsubscribed", **where}))
            return
        if not await self.store.exists(ref):
            await self.post(connection_id, error_frame("actor_not_found", "the actor does not exist", **where))
            return
        held = await self.connections.subscriptions_of(connection_id)
        if ref not in held and len(held) >= MAX_SUBSCRIPTIONS:
            await self.post(connection_id, error_frame(
                "too_many_subscriptions", f"a connection subscribes to at most {MAX_SUBSCRIPTIONS} actors", **where))
            return
        # Subscribed first, then the replay: an event committed in between is pushed live or replayed (or both:
        # the client's Sequencer keeps one), never neither.
        await self.connections.subscribe(ref, connection_id, frame.after)
        records = [r for r in await self.store.read_events(ref, frame.after, REPLAY_LIMIT) if r.seq > frame.after]
        for record in records:
            if not await self.post(connection_id, event_frame(ref.name, ref.key, record)):
                await self.connections.drop(connection_id)
                return
        await self.post(connection_id, subscribed_frame(ref.name, ref.key, records[-1].seq if records
                                                        else frame.after))

    async def disconnect(self, connection_id: str) -> None:
        """`$disconnect`: its subscriptions go."""
        await self.connections.drop(connection_id)


def _first_error(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'][1:]) or 'frame'}: {first['msg']}"
    return f"not JSON: {error}"


# -- the WebSocket API's routes on Lambda (the API function answers them: functions/api/handler.py) -----------------
WEBSOCKET_EVENTS = frozenset({"CONNECT", "MESSAGE", "DISCONNECT"})


def is_websocket_event(event: Mapping[str, Any]) -> bool:
    """Whether a Lambda event comes from the WebSocket API (else: the HTTP API)."""
    context = event.get("requestContext")
    return isinstance(context, Mapping) and context.get("eventType") in WEBSOCKET_EVENTS


def websocket_caller(context: Mapping[str, Any], settings: Settings) -> Caller | None:
    """Who a `$connect` is, as API Gateway verified it; None: refused. `iam`: the SigV4 principal of the
    `AWS_IAM` route; `jwt`: the claims the `$connect` Lambda authorizer verified (dormant.aws.authorizer), made a
    caller by the HTTP API's rule (dormant.core.claims); `none`: anonymous."""
    if settings.auth_mode == "none":
        return Caller(kind="anonymous", id="anonymous")
    if settings.auth_mode == "jwt":
        authorizer = context.get("authorizer")
        text = authorizer.get(CLAIMS_CONTEXT) if isinstance(authorizer, Mapping) else None
        try:
            claims = json.loads(text) if isinstance(text, str) else None
            return caller_from_claims(claims, issuer=settings.jwt_issuer, audiences=settings.jwt_audiences())
        except (ValueError, ClaimsRefused):
            return None
    identity = context.get("identity")
    if settings.auth_mode != "iam" or not isinstance(identity, Mapping) or not identity.get("userArn"):
        return None
    claims = {name: identity[field] for name, field in (("accountId", "accountId"), ("userArn", "userArn"),
                                                         ("userId", "user"), ("callerId", "caller"))
              if identity.get(field)}
    return Caller(kind="iam", id=str(identity["userArn"]), claims=claims)


def management_url(context: Mapping[str, Any], settings: Settings) -> str:
    """Where the Management API is: DORMANT_REALTIME_URL, else the API's own domain and stage."""
    return settings.realtime_url or f"https://{context['domainName']}/{context['stage']}"


class LambdaRealtime:
    """The WebSocket API's `$connect`, `$default` and `$disconnect` on Lambda: one event loop and client set per
    container, made on the first event (like dormant.aws.worker.LambdaWorker)."""

    def __init__(self, registry: Registry, settings: Settings,
                 actions: Callable[[ServiceSource], Actions] | None = None) -> None:
        """`actions(service)`: the answerer of action frames over an ActorService this container opens at the
        first action (functions/api/handler.py passes dormant.http.actions.SocketActions)."""
        self.registry = registry
        self.settings = settings
        self.actions = actions(self._service) if actions is not None else None
        self._service_stack: AsyncExitStack | None = None
        self._opened: ActorService | None = None
        self._runner: asyncio.Runner | None = None
        self._open: tuple[Connections, EventStore, ManagementApi] | None = None
        self._stack: AsyncExitStack | None = None

    def __call__(self, event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(self._invoke(event))

    async def _invoke(self, event: Mapping[str, Any]) -> dict[str, Any]:
        # An invocation owns this event loop (its own Runner): its DynamoDB and SQS requests, one after another, are
        # made on the loop's thread rather than handed to a pool thread and back each (as the HTTP route's,
        # functions/api/handler.py; dormant.core.clients.inline_calls)
        with inline_calls():
            return await self.handle(event)

    def close(self) -> None:
        """Close the clients and the event loop `__call__` made (the next event makes them again)."""
        if self._runner is None:
            return
        self._runner.run(self.aclose())
        self._runner.close()
        self._runner = None

    async def handle(self, event: Mapping[str, Any]) -> dict[str, Any]:
        request = event["requestContext"]
        connection_id = str(request["connectionId"])
        connections, store, management = await self._ensure(request)
        kind = request["eventType"]
        if kind == "CONNECT":
            caller = websocket_caller(request, self.settings)
            if caller is None:
                return {"statusCode": 401, "body": "unauthorized"}
            await connections.connected(connection_id, caller.model_dump_json())
            return {"statusCode": 200}
        if kind == "DISCONNECT":
            await connections.drop(connection_id)
            return {"statusCode": 200}
        recorded = await connections.caller_of(connection_id)
        if recorded is None:  # its $connect was not recorded (or expired): it must connect again
            await management.post(connection_id, error_frame("unauthorized", "connect again"))
            await management.delete(connection_id)
            return {"statusCode": 200}
        body = event.get("body") or ""
        if event.get("isBase64Encoded"):
            body = base64.b64decode(body).decode()
        gateway = Gateway(self.registry, store, connections, management.post, self.actions)
        await gateway.message(connection_id, Caller.model_validate_json(recorded), body)
        return {"statusCode": 200}

    async def aclose(self) -> None:
        """Close the clients (the next event makes them again)."""
        if self._stack is not None:
            await self._stack.aclose()
        self._stack, self._open = None, None
        if self._service_stack is not None:
            await self._service_stack.aclose()
        self._service_stack, self._opened = None, None

    async def _service(self) -> ActorService:
        """The ActorService actions run on (DynamoDB + SQS, as the HTTP API's), opened at the first action."""
        if self._opened is None:
            from dormant.aws.service import open_aws_service

            stack = AsyncExitStack()
            self._opened = await stack.enter_async_context(open_aws_service(self.registry, self.settings))
            self._service_stack = stack
        return self._opened

    async def _ensure(self, request: Mapping[str, Any]) -> tuple[Connections, EventStore, ManagementApi]:
        if self._open is None:
            from dormant.dynamodb.requests import Table
            from dormant.dynamodb.store import DynamoEventStore
            from dormant.s3.blobs import S3Blobs

            settings = self.settings.model_copy(update={"realtime_url": management_url(request, self.settings)})
            stack = AsyncExitStack()
            services = ["dynamodb", *(["s3"] if settings.bucket else [])]
            clients = await stack.enter_async_context(open_clients(settings, *services))
            management = await stack.enter_async_context(open_management(settings))
            blobs = S3Blobs(clients[1], settings.bucket) if settings.bucket else None
            store = DynamoEventStore(clients[0], settings, settle_on_load=False, blobs=blobs)
            self._open = (Connections(Table(clients[0], settings.table), time.time), store, management)
            self._stack = stack
        return self._open
