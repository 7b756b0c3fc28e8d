"""The AWS clients the backends (dormant.dynamodb, dormant.s3, dormant.sqs) and their compositions (dormant.aws,
`dormant dev`) call, made one of two ways with the same face (`await client.query(...)`,
`client.exceptions`, `client.meta.events`):

- `aiobotocore` (the default): native asyncio clients. A call is cancelled with its task, so the dev stack
  and its long-polling pollers stop at once.
- `threads` (`DORMANT_AWS_CLIENTS=threads`, what the Lambda functions use): botocore's own clients, each call
  run in a thread of one shared pool. Importing aiobotocore imports aiohttp (about 150 ms of every cold start,
  docs/performance.md), while a function makes a few requests per wake-up that a pool of threads serves as well.
  A cancelled call's thread still finishes its request (bounded by the read timeout): fine in a function,
  not for a process that must exit at once. Within `inline_calls()` (a Lambda invocation, which owns its event loop:
  the worker's batch of one actor, the API's request) a DynamoDB or SQS call is made on the calling thread instead:
  a hand-off to the pool and back wakes two threads, and two calls in flight at once contend for the interpreter;
  docs/performance.md ("Fifth round") measures what that costs.

Either way a request does no more per call than it must (docs/performance.md, "Through the AWS adapter"): DynamoDB's
item responses are parsed lean (dormant.core.responses), the User-Agent is made once per client, DynamoDB and SQS
requests, which Dormant's own code builds, are not validated against the model again, and botocore's generic event
handlers that can do nothing for their operations are not called on every request (`trim_handlers`).

Nothing here imports aiobotocore unless it is asked for. It sits below the backends (a store can open its own
client: DynamoEventStore.connect) and knows the settings only by their face (`ClientSettings`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import Any, Literal, Protocol

ClientKind = Literal["aiobotocore", "threads"]
# Threads for calls in flight at once: a batch of 10 actors with two concurrent reads each, and headroom.
POOL_THREADS = 32
_pool: ThreadPoolExecutor | None = None


class ClientSettings(Protocol):
    """What a client is made from (dormant.settings.Settings is one)."""

    @property
    def aws_clients(self) -> ClientKind: ...

    def client_kwargs(self, service: str | None = None) -> dict[str, Any]: ...


def client_options(*, attempts: int = 4, connect_timeout: float = 5, read_timeout: float = 30) -> dict[str, Any]:
    """Retries with backoff on throttling and 5xx (botocore's standard mode); never on conditional failures.

    The API passes shorter limits (see aws.service): a client waiting on an unreachable service gets its 503
    within seconds, well inside API Gateway's 30 s."""
    return {"retries": {"mode": "standard", "max_attempts": attempts}, "max_pool_connections": 64,
            "connect_timeout": connect_timeout, "read_timeout": read_timeout}


def _threads() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=POOL_THREADS, thread_name_prefix="dormant-aws")
    return _pool


@functools.cache
def botocore_session() -> Any:
    """One botocore session per process: its loaded endpoint data and models serve every client made from it
    (DynamoDB's item responses parsed lean: dormant.core.responses)."""
    from botocore.session import get_session  # type: ignore[import-untyped]

    from dormant.core.responses import lean_botocore

    return lean_botocore(get_session())


def aiobotocore_session() -> Any:
    """A new aiobotocore session (one per client: a session's credential lock belongs to the event loop that first
    uses it), DynamoDB's item responses parsed lean (dormant.core.responses), reading botocore's service models
    through the process's one loader (`_share_model_loader`)."""
    from aiobotocore.session import get_session  # type: ignore[import-untyped]

    from dormant.core.responses import lean_aiobotocore

    return _share_model_loader(lean_aiobotocore(get_session()))


_model_loader: list[Any] = []  # the first aiobotocore session's data loader, once made


def _share_model_loader(session: Any) -> Any:
    """`session`, reading its service models, endpoint rules and partitions through the loader of the process's first
    aiobotocore session: a loader keeps what it read, but each session makes its own, so each client read and parsed
    the same JSON files again (about 13 ms a file, five or more a client; botocore's clients share one session, and
    so one loader, already: `botocore_session`). The loaded models are only read, as one session's clients share
    them. The first session's loader is botocore's own (its data path included)."""
    if _model_loader:
        session.register_component("data_loader", _model_loader[0])
    else:
        _model_loader.append(session.get_component("data_loader"))
    return session


# The services whose every request Dormant's own code builds: botocore's check of the parameters against the model
# (a walk of every request) is switched off there; the server still refuses what is invalid (StorageRefusedError).
OWN_INPUTS = frozenset({"dynamodb", "sqs"})


def fixed_user_agent(session: Any) -> str:
    """The User-Agent of Dormant's clients, made once: botocore otherwise rebuilds its full header twice per request
    (a tenth of a DynamoDB request's client CPU), only to report which optional client features are on."""
    return f"{session.user_agent_name}/{session.user_agent_version} dormant"  # (+ the session's extra, by botocore)


def trim_handlers(client: Any) -> list[str]:
    """Take off a DynamoDB or SQS client's events the handlers botocore calls on every request but that do nothing for
    that service's operations; returns what was taken off (for tests and docs/performance.md).

    Each is kept, by exact event name, for the operations where it could act, so nothing a request sends changes:

    - `generate_idempotent_uuid` fills idempotency tokens: only operations with such a member (DynamoDB's
      TransactWriteItems) keep it;
    - `_handle_request_validation_mode_member` sets a response-checksum member: only operations that declare one;
    - `inject_api_version_header_if_needed` acts on endpoint-discovery operations only;
    - the User-Agent rebuild before each send: with `Config(user_agent=...)` (every client made here) botocore's
      rebuilt header is that fixed text and the session's extras, which the request already carries.

    The client's own event emitter is edited (a copy of the session's): other clients are untouched."""
    from botocore import handlers  # type: ignore[import-untyped]

    model = client.meta.service_model
    service = model.service_id.hyphenize()
    events = client.meta.events
    trimmed: list[str] = []
    rules: list[tuple[str, Any, Callable[[Any], bool]]] = [
        ("before-parameter-build", handlers.generate_idempotent_uuid,
         lambda operation: bool(operation.idempotent_members)),
        ("before-parameter-build", getattr(handlers, "_handle_request_validation_mode_member", None),
         lambda operation: operation.http_checksum.get("requestValidationModeMember") is not None),
        ("before-call", handlers.inject_api_version_header_if_needed,
         lambda operation: bool(operation.is_endpoint_discovery_operation))]
    for event, handler, applies in rules:
        if handler is None:
            continue
        events.unregister(event, handler)
        for name in model.operation_names:
            if applies(model.operation_model(name)):
                events.register(f"{event}.{service}.{name}", handler)
        trimmed.append(handler.__name__)
    creator = getattr(client, "_user_agent_creator", None)
    if creator is not None and client.meta.config.user_agent is not None:
        events.unregister(f"request-created.{service}", creator.rebuild_and_replace_user_agent_handler)
        trimmed.append("rebuild_and_replace_user_agent_handler")
    return trimmed


INLINE_SERVICES = frozenset(("dynamodb", "sqs"))
"""The services whose calls `inline_calls()` makes on the calling thread. Not S3's: a load fetches a history's large
values many at once (dormant.s3.large_values), where overlapping requests save more time than the pool costs."""

INLINE_TOGETHER = 2
"""The most calls started together (in one turn of the event loop: asyncio.gather's) that `inline_calls()` makes one
after the other on the calling thread, a load's two reads; of a bigger group (a batch of sends) the others overlap in
the pool."""


class _InlineScope:
    """What the tasks of one `inline_calls()` share: the calls started and not yet made."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting = 0


_inline: contextvars.ContextVar[_InlineScope | None] = contextvars.ContextVar("dormant_inline_calls", default=None)


@contextmanager
def inline_calls() -> Iterator[None]:
    """Within it, a `ThreadedClient` call of one of INLINE_SERVICES runs on the calling thread (the event loop's),
    blocking it for the request, rather than in the pool: for work that makes its requests one after another anyway
    (the Lambda worker's batch of one actor: a load, a commit). Up to INLINE_TOGETHER calls started together (a
    load's two reads) are made one after the other: a round trip more, and less CPU than two threads making requests
    at once (docs/performance.md); of a bigger group the others overlap in the pool. A call made inline cannot be
    cancelled half-way; its read timeout bounds it, as it bounds a pool thread's. Nothing changes for aiobotocore's
    clients."""
    token = _inline.set(_InlineScope())
    try:
        yield
    finally:
        _inline.reset(token)


class ThreadedClient:
    """An awaitable face over a botocore client: `await client.put_item(...)` runs the call in a pool thread.

    The call carries the caller's context variables (request metering scopes, dormant.aws.metering), so
    botocore's event hooks, which run in that thread, count into the caller's meters."""

    def __init__(self, client: Any, pool: ThreadPoolExecutor | None = None, *, inline: bool = False) -> None:
        self._client = client
        self._pool = pool or _threads()
        self._inline = inline  # whether `inline_calls()` applies to it (INLINE_SERVICES)
        self.meta = client.meta
        self.exceptions = client.exceptions

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute) or name.startswith("_"):
            return attribute
        call = self._awaitable(attribute)
        setattr(self, name, call)  # made once per operation
        return call

    def _awaitable(self, method: Callable[..., Any]) -> Callable[..., Any]:
        inline = self._inline

        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            scope = _inline.get() if inline else None
            if scope is not None:
                scope.waiting += 1
                try:  # (the calls started with this one, in the other tasks of a gather, count themselves meanwhile)
                    await asyncio.sleep(0)
                    together = scope.waiting
                finally:  # (a call cancelled here is not counted as waiting any more)
                    scope.waiting -= 1
                if together <= INLINE_TOGETHER:
                    return method(*args, **kwargs)
            context = contextvars.copy_context()
            bound = functools.partial(context.run, method, *args, **kwargs)
            return await asyncio.get_running_loop().run_in_executor(self._pool, bound)
        return call

    async def close(self) -> None:
        self._client.close()


@asynccontextmanager
async def open_client(service: str, settings: ClientSettings, *, kind: ClientKind | None = None, session: Any = None,
                      **options: Any) -> AsyncIterator[Any]:
    """One client for `service` at the settings' endpoint and region, closed on exit. `options`: those of
    `client_options` (retries, timeouts); `session`: an aiobotocore session to make it from (a botocore one
    for `threads`; default: a shared one)."""
    kind = kind or settings.aws_clients
    config = client_options(**options)
    endpoint = settings.client_kwargs(service)
    if str(endpoint.get("endpoint_url", "")).lower().startswith("http://"):
        # A plain-HTTP endpoint (`dormant dev`, DynamoDB Local, LocalStack) has no TLS to verify, and a client told to
        # verify loads the CA bundle all the same: about 60 ms of CPU per aiobotocore client.
        endpoint["verify"] = False
    if service == "s3":  # presigned URLs (dormant.http.large_responses) signed as every region accepts them
        config["signature_version"] = "s3v4"
    if service in OWN_INPUTS:
        config["parameter_validation"] = False
    if kind == "threads":
        from botocore.config import Config  # type: ignore[import-untyped]

        session = session or botocore_session()
        client = session.create_client(service, config=Config(user_agent=fixed_user_agent(session), **config),
                                       **endpoint)
        if service in OWN_INPUTS:
            trim_handlers(client)
        try:
            yield ThreadedClient(client, inline=service in INLINE_SERVICES)
        finally:
            client.close()
        return
    from aiobotocore.config import AioConfig  # type: ignore[import-untyped]

    session = session or aiobotocore_session()
    async with session.create_client(service, config=AioConfig(user_agent=fixed_user_agent(session), **config),
                                     **endpoint) as client:
        if service in OWN_INPUTS:
            trim_handlers(client)
        yield client


@asynccontextmanager
async def open_clients(settings: ClientSettings, *services: str, kind: ClientKind | None = None,
                       **options: Any) -> AsyncIterator[list[Any]]:
    """Clients for several services (e.g. "dynamodb", "sqs"), closed together on exit."""
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(open_client(service, settings, kind=kind, **options))
               for service in services]
