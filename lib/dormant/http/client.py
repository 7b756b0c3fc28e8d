"""The HTTP client: the handle API of `dormant.client.Client`, over the HTTP API (dormant.http.app).

    async with HttpClient("https://api.example.com", token="...", registry=registry) as client:
        handle = client.get_or_create("workflow-counter", ["main"])
        await handle.send("counter", {"delta": 1})
        print(await handle.state())          # CounterState(...) with a registry, a dict without

    with SyncHttpClient("http://127.0.0.1:8000") as client:   # scripts
        client.get_or_create("workflow-counter", "main").send("counter", {"delta": 1})

Given the registry (the application's `setup(...)`), the client returns the same types as the in-process
client: `state()` the state model, `call()` the action's result validated against its return annotation,
and it checks queue names and bodies before any I/O. Without it, `state()` and `call()` return JSON.

Who the client is: `auth=SigV4()` (auth mode iam) or `auth=BearerToken(jwt)` (jwt), dormant.http.signing;
`token=` is the operator token of the history and inspector routes (sent as `Authorization: Bearer`, or as
`X-Dormant-Operator-Token` when `auth` owns the Authorization header).

Retries with exponential backoff (and `Retry-After`): idempotent requests (reads, create, sends - every
send carries a message id, so a re-send is ignored by the actor) on 429, 5xx and connection errors;
actions, which are not idempotent, only when the server cannot have run them (connection refused, 429, 503).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import ssl
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar, get_type_hints
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter, ValidationError

from dormant.actor import Registry
from dormant.client import ActionShortcuts
from dormant.errors import (
    ActorNotFoundError,
    InvalidMessageError,
    SendFailedError,
    StillDivergedError,
    WouldDivergeError,
)
from dormant.http.callback_client import CallbackCalls
from dormant.http.error_codes import EXCEPTION_BY_CODE
from dormant.http.headers import OPERATOR_HEADER
from dormant.http.keys import encode_key
from dormant.http.operator_client import HandleOperatorCalls, OperatorCalls
from dormant.http.realtime import ActorConnection, SyncActorConnection
from dormant.models import ActorStatus, SendResult
from dormant.ports import ActorRef, EventRecord
from dormant.workflow.errors import DormantError
from dormant.workflow.execution import to_json
from dormant.workflow.history import HistoryEntry

T = TypeVar("T")
DEFAULT_SEND_TIMEOUT = 30.0  # as the in-process client
RETRYABLE = frozenset({429, 500, 502, 503, 504})
NOTHING_RAN = frozenset({429, 503})  # the server says it did not run the request
UNSENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_NO_BODY = object()


class HttpError(DormantError):
    """An error answer from the API that maps to no more specific exception."""

    def __init__(self, status: int, code: str, message: str, detail: Any = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.detail = detail


class UnauthorizedError(HttpError):
    """401: no verified identity (pass `auth=SigV4()` or `auth=BearerToken(...)`), or the route needs the
    operator token (pass `token=`)."""


class ActionFailedError(HttpError):
    """The action raised on the server; `message` is "ExceptionType: text"."""


class InvalidArgumentsError(HttpError, TypeError):
    """The action's arguments do not fit its signature (in-process this is a TypeError too)."""


def error_from_response(response: httpx.Response) -> DormantError:
    """The exception an error response stands for (dormant's own where one matches)."""
    try:
        info = response.json()["error"]
        code, message, detail = str(info["code"]), str(info["message"]), info.get("detail")
    except (ValueError, KeyError, TypeError):
        return HttpError(response.status_code, "http_error", response.text[:500] or response.reason_phrase)
    return error_from_info(response.status_code, code, message, detail)


def error_from_info(status: int, code: str, message: str, detail: Any = None) -> DormantError:
    """The exception an error (status, code, message, detail) stands for: an HTTP error body's, or an action
    answered over a WebSocket (docs/realtime.md)."""
    if code == "invalid_body":
        return InvalidMessageError(message, errors=detail if isinstance(detail, list) else None)
    if code == "send_failed" and isinstance(detail, dict):  # whether the message is stored, and its id
        return SendFailedError(message, message_id=str(detail.get("id", "")), stored=bool(detail.get("stored")))
    if code == "still_diverged":
        return StillDivergedError(message, detail if isinstance(detail, dict) else None)
    if code == "would_diverge":
        return WouldDivergeError(message, detail if isinstance(detail, dict) else None)
    if code in EXCEPTION_BY_CODE:
        return EXCEPTION_BY_CODE[code](message)
    if code == "unauthorized":
        return UnauthorizedError(status, code, message, detail)
    if code == "action_failed":
        return ActionFailedError(status, code, message, detail)
    if code == "invalid_arguments":
        return InvalidArgumentsError(status, code, message, detail)
    return HttpError(status, code, message, detail)


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries in all; delays base * 2^n, capped at `max_delay`, with jitter."""

    attempts: int = 5
    base_delay: float = 0.1
    max_delay: float = 2.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after is not None:
            with contextlib.suppress(ValueError):  # an HTTP date instead of seconds: use our own backoff
                return min(self.max_delay, max(0.0, float(retry_after)))
        return min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1)) * random.uniform(0.5, 1.0)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The clients' TLS settings, made once per process as httpx makes them by default (certifi's bundle, or the
    environment's SSL_CERT_FILE / SSL_CERT_DIR as they are when the first client is made): loading the bundle takes
    about 50 ms of CPU, which each client paid (every CLI command, each client of a test), even for an http:// API."""
    return httpx.create_ssl_context()


class HttpClient(OperatorCalls, CallbackCalls):
    """Async client of the HTTP API, with the in-process client's handle API."""

    def __init__(self, base_url: str, token: str | None = None, *, registry: Registry | None = None,
                 retry: RetryPolicy | None = None, timeout: float = 30.0, poll_wait: float = 20.0,
                 transport: httpx.AsyncBaseTransport | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 headers: dict[str, str] | None = None, auth: httpx.Auth | None = None,
                 realtime_url: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        # The WebSocket API (docs/realtime.md): `dormant dev` serves it at /realtime on its own port; on AWS it
        # is the stack's WebSocketUrl output.
        self.realtime_url = realtime_url or self.base_url.replace("http", "ws", 1) + "/realtime"
        self.registry = registry
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.poll_wait = poll_wait
        self._transport = transport
        self._sleep = sleep
        self._headers = dict(headers or {})
        self._auth = auth
        if token is not None:  # Authorization belongs to `auth` when there is one (SigV4 or a JWT)
            self._headers.update({OPERATOR_HEADER: token} if auth is not None else {"Authorization": f"Bearer {token}"})
        self._http: httpx.AsyncClient | None = None
        self._adapters: dict[tuple[str, str], TypeAdapter[Any] | None] = {}

    def socket_url(self) -> str:
        """The WebSocket API's URL for a new connection: presigned with SigV4 when `auth` is SigV4 (the AWS_IAM
        `$connect` of auth mode iam)."""
        from dormant.http.signing import SigV4  # botocore: loaded when a signing client connects

        if isinstance(self._auth, SigV4):
            return self._auth.presign(self.realtime_url)
        return self.realtime_url

    def socket_headers(self) -> dict[str, str]:
        """The headers a WebSocket handshake carries (those given, the operator token, and a BearerToken's
        `Authorization`: what the `$connect` authorizer of auth mode jwt checks)."""
        from dormant.http.signing import BearerToken

        headers = dict(self._headers)
        if isinstance(self._auth, BearerToken):
            headers["Authorization"] = f"Bearer {self._auth.token()}"
        return headers

    def get_or_create(self, actor_name: str, key: str | Sequence[str], *, input: Any = None) -> HttpActorHandle:
        """A handle (no I/O): the first request creates the actor (with `input`) if needed."""
        return HttpActorHandle(self, self._ref(actor_name, key), actor_input=input)

    def get(self, actor_name: str, key: str | Sequence[str]) -> HttpActorHandle:
        """A handle (no I/O) that never creates: a request on a missing actor raises ActorNotFoundError (404)."""
        return HttpActorHandle(self, self._ref(actor_name, key), creates=False)

    async def create(self, actor_name: str, key: str | Sequence[str], *, input: Any = None) -> HttpActorHandle:
        """Create the actor now (PUT /actors/{actor}/{key} with If-None-Match: *) and return a handle that never
        creates; ActorExistsError (409) if it exists. Not retried: a create that got through but lost its answer
        would be refused as actor_exists."""
        handle = HttpActorHandle(self, self._ref(actor_name, key), creates=False)
        await self.request("PUT", handle.path, json={"input": to_json(input)}, headers={"If-None-Match": "*"},
                           idempotent=False)
        return handle

    def _ref(self, actor_name: str, key: str | Sequence[str]) -> ActorRef:
        if self.registry is not None:
            self.registry.get(actor_name)
        return ActorRef(name=actor_name, key=(key,) if isinstance(key, str) else tuple(key))

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    # -- transport with retries -------------------------------------------------------------------------
    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            # Redirects: a response too big for the API function comes as a 303 to a presigned S3 URL
            # (dormant.http.large_responses); httpx drops this client's Authorization on the way there.
            self._http = httpx.AsyncClient(base_url=self.base_url, headers=self._headers, timeout=self.timeout,
                                           transport=self._transport, auth=self._auth, follow_redirects=True,
                                           verify=_tls_context())
        return self._http

    async def request(self, method: str, path: str, *, idempotent: bool, json: Any = _NO_BODY,
                      params: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                      timeout: float | None = None) -> httpx.Response:
        """One API request, retried as the module docstring says; error answers raise."""
        client = self._client()
        extra: dict[str, Any] = {} if json is _NO_BODY else {"json": json}
        if timeout is not None:
            extra["timeout"] = httpx.Timeout(self.timeout, read=timeout)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await client.request(method, path, params=params, headers=headers, **extra)
            except httpx.TransportError as error:
                if attempt >= self.retry.attempts or not (idempotent or isinstance(error, UNSENT)):
                    raise
                await self._sleep(self.retry.delay(attempt))
                continue
            status = response.status_code
            if (status in RETRYABLE and attempt < self.retry.attempts
                    and (idempotent or status in NOTHING_RAN) and not _is_action_failure(response)):
                await self._sleep(self.retry.delay(attempt, response.headers.get("retry-after")))
                continue
            if status >= 400:
                raise error_from_response(response)
            return response

    def adapter(self, actor_name: str, action: str) -> TypeAdapter[Any] | None:
        """Validates an action's JSON result into its return annotation (None: return the JSON)."""
        cache_key = (actor_name, action)
        if cache_key not in self._adapters:
            adapter = None
            if self.registry is not None:
                fn = self.registry.get(actor_name).actions.get(action)
                try:
                    returns = get_type_hints(fn).get("return") if fn is not None else None
                    if returns is not None and returns is not Any and returns is not type(None):
                        adapter = TypeAdapter(returns)
                except Exception:  # unresolvable or unsupported annotation: hand out the JSON
                    adapter = None
            self._adapters[cache_key] = adapter
        return self._adapters[cache_key]


def _is_action_failure(response: httpx.Response) -> bool:
    if response.status_code != 500:
        return False
    try:
        return bool(response.json()["error"]["code"] == "action_failed")
    except (ValueError, KeyError, TypeError):
        return False


class HttpActorHandle(ActionShortcuts, HandleOperatorCalls):
    """A handle to one actor over HTTP; the same methods as dormant.client.ActorHandle."""

    _client: HttpClient

    def __init__(self, client: HttpClient, ref: ActorRef, *, actor_input: Any = None, creates: bool = True) -> None:
        self._client = client
        self._input = to_json(actor_input)
        self._creates = creates  # False (client.get, client.create): every request sends create=false
        self._created = not creates
        self.ref = ref
        self.path = f"/actors/{quote(ref.name, safe='')}/{encode_key(ref.key)}"

    def _definition_check(self, queue: str | None = None, body: Any = None, action: str | None = None) -> None:
        registry = self._client.registry
        if registry is None:
            return
        definition = registry.get(self.ref.name)
        if queue is not None:
            definition.queue_spec(queue).validate_body(queue, body)
        if action is not None:
            definition.action_fn(action)

    async def _create_with_input(self) -> None:
        """With an input, create first (as the in-process client passes it along with the first request)."""
        if self._creates and not self._created and self._input is not None:
            await self.create()

    async def create(self) -> bool:
        """Get or create the actor now; True if this call created it (also through a `get` handle: explicit)."""
        response = await self._client.request("PUT", self.path, json={"input": self._input}, idempotent=True)
        self._created = True
        return bool(response.json()["created"])

    async def send(self, queue: str, body: Any, *, wait: bool = False, timeout: float | None = None,
                   message_id: str | None = None) -> SendResult:
        """Send to a queue; with `wait`, wait for the workflow's `complete()` (re-polling the same message id
        when the server's own wait limit is shorter than `timeout`)."""
        self._definition_check(queue=queue, body=body)
        await self._create_with_input()
        message_id = message_id or str(uuid.uuid4())  # a retried send is then one message
        path = f"{self.path}/queues/{quote(queue, safe='')}"
        payload = to_json(body)
        deadline = time.monotonic() + (timeout or DEFAULT_SEND_TIMEOUT)
        while True:
            params: dict[str, Any] = self._no_create()
            read_timeout = None
            if wait:
                remaining = max(0.001, deadline - time.monotonic())
                params.update({"wait": "true", "timeout": f"{remaining:.3f}"})
                read_timeout = remaining + self._client.timeout
            response = await self._client.request("POST", path, json=payload, params=params, idempotent=True,
                                                  headers={"Idempotency-Key": message_id}, timeout=read_timeout)
            self._created = True
            result = SendResult.model_validate(response.json())
            if result.status != "timedOut" or deadline - time.monotonic() <= 0.01:
                return result

    async def send_many(self, queue: str, bodies: Sequence[Any], *,
                        message_ids: Sequence[str] | None = None) -> list[SendResult]:
        """Many messages to one queue in one request, in order (POST .../queues/{queue}/batch). Ids are made when
        none are given, so a retried batch is the same messages."""
        for body in bodies:
            self._definition_check(queue=queue, body=body)
        await self._create_with_input()
        ids = list(message_ids) if message_ids is not None else [str(uuid.uuid4()) for _ in bodies]
        payload = {"messages": [{"body": to_json(body), "id": mid} for body, mid in zip(bodies, ids, strict=True)]}
        response = await self._client.request("POST", f"{self.path}/queues/{quote(queue, safe='')}/batch",
                                              json=payload, params=self._no_create(), idempotent=True)
        self._created = True
        answer = response.json()
        workflow = answer.get("workflow")
        return [SendResult(status="queued", id=mid, workflow=workflow) for mid in answer["ids"]]

    async def call(self, action: str, *args: Any) -> Any:
        """Run an action; the result as the action's return annotation when the client has the registry."""
        self._definition_check(action=action)
        await self._create_with_input()
        response = await self._client.request("POST", f"{self.path}/actions/{quote(action, safe='')}",
                                              json=[to_json(a) for a in args], params=self._no_create(),
                                              idempotent=False)
        self._created = True
        return self._result(action, response.json()["result"])

    def action_frame(self, action: str, args: Sequence[Any]) -> dict[str, Any]:
        """An action frame's fields for the WebSocket (docs/realtime.md), checked as `call` checks them."""
        self._definition_check(action=action)
        return {"actor": self.ref.name, "key": list(self.ref.key), "name": action,
                "args": [to_json(a) for a in args], "create": self._creates}

    def action_answer(self, action: str, answer: dict[str, Any]) -> Any:
        """An `action_result` frame's result (as `call` returns it), or the exception its error stands for."""
        if answer.get("ok"):
            return self._result(action, answer.get("result"))
        error = answer.get("error") or {}
        raise error_from_info(int(error.get("status", 500)), str(error.get("code", "internal")),
                              str(error.get("message", "")), error.get("detail"))

    def _result(self, action: str, value: Any) -> Any:
        adapter = self._client.adapter(self.ref.name, action)
        if adapter is None:
            return value
        try:
            return adapter.validate_python(value)
        except ValidationError:
            return value  # the annotation does not describe what the action returned

    def _no_create(self) -> dict[str, Any]:
        return {} if self._creates else {"create": "false"}

    async def _get(self, suffix: str, params: dict[str, Any] | None = None, *,
                   timeout: float | None = None) -> Any:
        """GET a read route; reads never create, so a missing actor is created (like the in-process
        handle's first request) and the read repeated."""
        path = self.path + suffix
        try:
            response = await self._client.request("GET", path, params=params, idempotent=True, timeout=timeout)
        except ActorNotFoundError:
            if self._created or not self._creates:
                raise
            await self.create()
            response = await self._client.request("GET", path, params=params, idempotent=True, timeout=timeout)
        self._created = True
        return response.json()

    async def state(self) -> Any:
        """The state model when the client has the registry, else the state as a dict."""
        value = await self._get("/state")
        if self._client.registry is None:
            return value
        return self._client.registry.get(self.ref.name).state.model_validate(value)

    async def status(self) -> ActorStatus:
        return ActorStatus.model_validate(await self._get("/status"))

    async def history(self) -> list[HistoryEntry]:
        """The workflow history (needs the inspector token unless the server is in dev mode)."""
        return [HistoryEntry.model_validate(e) for e in await self._get("/history")]

    def connect(self, *, after: int = 0) -> ActorConnection:
        """The actor's events pushed over a WebSocket (no polling): `async with handle.connect() as c:` then
        `c.on(name, callback)` and `async for event in c` (dormant.http.realtime)."""
        return ActorConnection(self, self._client.socket_url, self._client.socket_headers, after)

    async def events(self, *, after: int = 0, follow: bool = True) -> AsyncGenerator[EventRecord, None]:
        """Events in order after cursor `after`; with `follow`, long-poll for new ones forever."""
        cursor = after
        wait = self._client.poll_wait if follow else 0.0
        while True:
            page = await self._get("/events", {"after": cursor, "wait": wait, "limit": 1000},
                                   timeout=wait + self._client.timeout)
            for item in page["events"]:
                record = EventRecord.model_validate(item)
                cursor = record.seq
                yield record
            if not follow and not page["events"]:
                return


class SyncHttpClient:
    """Blocking wrapper for scripts (not for use inside a running event loop)."""

    def __init__(self, base_url: str, token: str | None = None, **options: Any) -> None:
        self._runner = asyncio.Runner()
        self.client = HttpClient(base_url, token, **options)

    def run(self, awaitable: Awaitable[T]) -> T:
        async def wrapper() -> T:
            return await awaitable

        return self._runner.run(wrapper())

    def get_or_create(self, actor_name: str, key: str | Sequence[str], *, input: Any = None) -> SyncActorHandle:
        return SyncActorHandle(self, self.client.get_or_create(actor_name, key, input=input))

    def get(self, actor_name: str, key: str | Sequence[str]) -> SyncActorHandle:
        return SyncActorHandle(self, self.client.get(actor_name, key))

    def create(self, actor_name: str, key: str | Sequence[str], *, input: Any = None) -> SyncActorHandle:
        return SyncActorHandle(self, self.run(self.client.create(actor_name, key, input=input)))

    def close(self) -> None:
        self._runner.run(self.client.aclose())
        self._runner.close()

    def __enter__(self) -> SyncHttpClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class SyncActorHandle:
    """The blocking twin of HttpActorHandle."""

    def __init__(self, owner: SyncHttpClient, handle: HttpActorHandle) -> None:
        self._owner = owner
        self.handle = handle
        self.ref = handle.ref

    def send(self, queue: str, body: Any, *, wait: bool = False, timeout: float | None = None,
             message_id: str | None = None) -> SendResult:
        return self._owner.run(self.handle.send(queue, body, wait=wait, timeout=timeout, message_id=message_id))

    def call(self, action: str, *args: Any) -> Any:
        return self._owner.run(self.handle.call(action, *args))

    def state(self) -> Any:
        return self._owner.run(self.handle.state())

    def status(self) -> ActorStatus:
        return self._owner.run(self.handle.status())

    def history(self) -> list[HistoryEntry]:
        return self._owner.run(self.handle.history())

    def connect(self, *, after: int = 0) -> SyncActorConnection:
        """The actor's events pushed over a WebSocket: `with handle.connect() as c: for event in c: ...`."""
        return SyncActorConnection(self._owner.run, self.handle.connect(after=after))

    def events(self, *, after: int = 0, follow: bool = False) -> Iterator[EventRecord]:
        """Events after `after`; by default only those stored now (follow=True blocks for new ones)."""
        iterator = self.handle.events(after=after, follow=follow)
        try:
            while True:
                try:
                    yield self._owner.run(iterator.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._owner.run(iterator.aclose())

    def __getattr__(self, action: str) -> Callable[..., Any]:
        if action.startswith("_"):
            raise AttributeError(action)

        def invoke(*args: Any) -> Any:
            return self.call(action, *args)

        return invoke
