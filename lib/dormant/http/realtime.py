"""`handle.connect()`: an actor's events pushed over a WebSocket (docs/realtime.md), with no polling.

    async with client.get_or_create("progress", ["job-1"]).connect(after=0) as connection:
        connection.on("progress_updated", lambda payload: print(payload))
        async for event in connection:          # EventRecords in seq order, each once
            ...

    await connection.call("add", 2)             # an action over the same socket (the HTTP route's path)

The connection subscribes with its cursor; the server replays the stored events after it, then pushes live ones
(dormant.core.realtime's `Sequencer` orders them). When the socket drops it reconnects and subscribes again from
the last event delivered, so nothing is missed or repeated; a skipped seq makes it subscribe again the same way.
An event pushed without its payload (too big for a frame) is read over HTTP before it is delivered. An action
sent over the socket is answered by an `action_result` frame with its correlation id; one in flight when the
socket drops raises RealtimeError `connection_lost` (it may have run: actions are not retried).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from types import TracebackType
from typing import Any, Protocol

from dormant.core.realtime import Sequencer
from dormant.core.records import EventRecord
from dormant.errors import ActorNotFoundError, ForbiddenError
from dormant.ports import ActorRef
from dormant.workflow.errors import DormantError

Callback = Callable[[Any], "Awaitable[None] | None"]
RECONNECT_FIRST, RECONNECT_MAX = 0.1, 5.0
CONNECT_ATTEMPTS = 5  # before the first subscription holds; afterwards it reconnects for as long as it is open
ACTION_ANSWER_SECONDS = 35.0  # the server answers within 25 s (dormant.core.realtime.ACTION_TIMEOUT_SECONDS)


class EventSource(Protocol):
    """What a connection needs of its handle (dormant.http.client.HttpActorHandle): the actor, and its stored
    events over HTTP (for an event pushed without its payload)."""

    ref: ActorRef

    def events(self, *, after: int = 0, follow: bool = True) -> AsyncIterator[EventRecord]: ...

    def action_frame(self, action: str, args: Sequence[Any]) -> dict[str, Any]: ...

    def action_answer(self, action: str, answer: dict[str, Any]) -> Any: ...


class RealtimeError(DormantError):
    """The realtime endpoint refused a frame or a subscription (its `code`, as in docs/realtime.md)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def _refusal(frame: dict[str, Any]) -> DormantError:
    code, message = str(frame.get("code")), str(frame.get("message"))
    if code == "forbidden":
        return ForbiddenError(message)
    if code == "actor_not_found":
        return ActorNotFoundError(message)
    return RealtimeError(code, message)


class ActorConnection:
    """One actor's events over a WebSocket: an async context manager and an async iterator of EventRecords."""

    def __init__(self, handle: EventSource, url: Callable[[], str], headers: Callable[[], dict[str, str]],
                 after: int) -> None:
        """`url()`, `headers()`: the WebSocket API's URL and the handshake's headers for each (re)connection
        (presigned anew when the client signs, a bearer token asked again)."""
        self.handle = handle
        self.url = url
        self.headers = headers
        self.cursor = after
        """The seq of the last event delivered: `connect(after=cursor)` later goes on from there."""
        self.connects = 0
        self._callbacks: dict[str, list[Callback]] = {}
        self._events: asyncio.Queue[EventRecord | BaseException] = asyncio.Queue()
        self._ready: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._socket: Any = None  # the open socket, for actions
        self._answers: dict[str, asyncio.Future[dict[str, Any]]] = {}

    def on(self, name: str, callback: Callback) -> ActorConnection:
        """Call `callback(payload)` (sync or async) for each event `name` ("*": every event), before it is
        iterated."""
        self._callbacks.setdefault(name, []).append(callback)
        return self

    async def __aenter__(self) -> ActorConnection:
        self._ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(), name="dormant-realtime")
        await self._ready  # subscribed (the stored events after `after` replayed), or the refusal raised
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def action(self, name: str, *args: Any, timeout: float = ACTION_ANSWER_SECONDS) -> Any:
        """Run action `name` over the socket (the HTTP action route's path, docs/realtime.md); its result as
        `handle.call` returns it, or the same exception."""
        if self._socket is None:
            raise RealtimeError("not_connected", "the connection is not open (use it inside `async with`)")
        correlation = uuid.uuid4().hex
        frame = {"type": "action", "id": correlation, **self.handle.action_frame(name, args)}
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._answers[correlation] = answer
        try:
            await self._socket.send(json.dumps(frame))
            return self.handle.action_answer(name, await asyncio.wait_for(answer, timeout))
        finally:
            self._answers.pop(correlation, None)

    call = action

    def __aiter__(self) -> ActorConnection:
        return self

    async def __anext__(self) -> EventRecord:
        item = await self._events.get()
        if isinstance(item, BaseException):
            raise item
        return item

    async def _run(self) -> None:
        import websockets

        delay = RECONNECT_FIRST
        attempts = 0
        while True:
            try:
                async with websockets.connect(self.url(), additional_headers=self.headers()) as socket:
                    self.connects += 1
                    try:
                        await self._serve(socket)
                    finally:
                        self._socket = None
                        self._lost()
            except (OSError, websockets.ConnectionClosed, websockets.InvalidHandshake) as error:
                attempts += 1
                if self._ready is not None and not self._ready.done() and attempts >= CONNECT_ATTEMPTS:
                    self._fail(error)
                    return
            except DormantError as error:
                self._fail(error)
                return
            await asyncio.sleep(delay)  # reconnect: subscribe again from the cursor
            delay = min(delay * 2, RECONNECT_MAX)

    async def _serve(self, socket: Any) -> None:
        sequencer = await self._subscribe(socket)
        self._socket = socket
        async for text in socket:
            frame = json.loads(text)
            if frame.get("type") == "action_result":
                waiting = self._answers.get(str(frame.get("id")))
                if waiting is not None and not waiting.done():
                    waiting.set_result(frame)
                continue
            if frame.get("type") == "error":
                raise _refusal(frame)
            for event in sequencer.take(frame):
                await self._deliver(event)
            if frame.get("type") == "subscribed" and self._ready is not None and not self._ready.done():
                self._ready.set_result(None)
            if sequencer.gap():  # a seq never came: the replay from the cursor brings it
                sequencer = await self._subscribe(socket)

    async def _subscribe(self, socket: Any) -> Sequencer:
        ref = self.handle.ref
        await socket.send(json.dumps({"type": "subscribe", "actor": ref.name, "key": list(ref.key),
                                      "after": self.cursor}))
        return Sequencer(cursor=self.cursor)

    async def _deliver(self, frame: dict[str, Any]) -> None:
        record = EventRecord(seq=frame["seq"], name=frame["name"], payload=frame.get("payload"), at=frame["at"])
        if frame.get("fetch"):  # too big for a frame: read over HTTP
            async for stored in self.handle.events(after=record.seq - 1, follow=False):
                record = stored
                break
        for callback in [*self._callbacks.get(record.name, []), *self._callbacks.get("*", [])]:
            outcome = callback(record.payload)
            if inspect.isawaitable(outcome):
                await outcome
        self.cursor = record.seq
        self._events.put_nowait(record)

    def _lost(self) -> None:
        for answer in self._answers.values():
            if not answer.done():
                answer.set_exception(RealtimeError("connection_lost", "the socket dropped before the action's "
                                                                      "answer: it may have run"))

    def _fail(self, error: BaseException) -> None:
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(error)
        else:
            self._events.put_nowait(error)


class SyncActorConnection:
    """The blocking twin: a context manager and an iterator, for scripts (`SyncActorHandle.connect`)."""

    def __init__(self, run: Callable[[Awaitable[Any]], Any], connection: ActorConnection) -> None:
        self._run = run
        self.connection = connection

    def on(self, name: str, callback: Callback) -> SyncActorConnection:
        self.connection.on(name, callback)
        return self

    @property
    def cursor(self) -> int:
        return self.connection.cursor

    def call(self, name: str, *args: Any) -> Any:
        """Run an action over the socket (`ActorConnection.action`)."""
        return self._run(self.connection.action(name, *args))

    def __enter__(self) -> SyncActorConnection:
        self._run(self.connection.__aenter__())
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._run(self.connection.aclose())

    def __iter__(self) -> Iterator[EventRecord]:
        while True:
            yield self._run(self.connection.__anext__())

    def next(self, timeout: float | None = None) -> EventRecord:
        """The next event; TimeoutError after `timeout` seconds without one."""
        return self._run(asyncio.wait_for(self.connection.__anext__(), timeout))  # type: ignore[no-any-return]
