"""The Python client: `client.get_or_create(actor, key)` -> handle with send/call/state/status/history/events;
`client.get(actor, key)` -> a handle that never creates; `await client.create(actor, key)` -> created now.

`Client` here runs in-process over the actor operations (the runtime's ActorService: tests, steps,
actions, `dormant dev`); `dormant.http.client.HttpClient` offers the same handle API over HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from dormant.core.cursors import every_result
from dormant.errors import ActorExistsError
from dormant.models import (
    ActorCounts,
    ActorStatus,
    AttentionList,
    CallbackStatus,
    Inbox,
    KeptVersion,
    OperationResult,
    SendResult,
    ValueCheck,
)
from dormant.ports import (
    ActorPage,
    ActorRef,
    ActorSummary,
    Clock,
    EventRecord,
    EventStore,
    InboxMessage,
    Transport,
    VersionInfo,
)
from dormant.runtime import search
from dormant.runtime.callbacks import CallbackOperations, error_parts
from dormant.runtime.ids import IdSource
from dormant.runtime.operations import Operator
from dormant.workflow.caller import Caller
from dormant.workflow.history import HistoryEntry, WorkflowState

if TYPE_CHECKING:
    from dormant.actor import Registry
    from dormant.runtime.access import Operation


class ActorOperations(Protocol):
    """What a client asks of the runtime (dormant's ActorService implements it)."""

    registry: Registry
    store: EventStore
    transport: Transport
    clock: Clock

    def ref(self, actor_name: str, key: str | Sequence[str]) -> ActorRef: ...

    async def authorize(self, ref: ActorRef, caller: Caller, operation: Operation, target: str | None = None
                        ) -> None: ...

    async def ensure_created(self, ref: ActorRef, actor_input: Any = None, *, caller: Caller | None = None
                             ) -> bool: ...

    async def send(self, ref: ActorRef, queue_name: str, body: Any, *, wait: bool = False,
                   timeout: float | None = None, message_id: str | None = None,
                   actor_input: Any = None, sender: Caller | None = None, derived_id: bool = False,
                   create: bool = True) -> SendResult: ...

    async def send_many(self, ref: ActorRef, queue_name: str, bodies: Sequence[Any], *,
                        message_ids: Sequence[str] | None = None, actor_input: Any = None,
                        sender: Caller | None = None, create: bool = True) -> list[SendResult]: ...

    async def call(self, ref: ActorRef, action: str, args: Sequence[Any] = (), *, actor_input: Any = None,
                   caller: Caller | None = None, create: bool = True) -> Any: ...

    async def state(self, ref: ActorRef, *, create: bool = True) -> Any: ...

    async def status(self, ref: ActorRef, *, create: bool = True) -> ActorStatus: ...

    async def history(self, ref: ActorRef, *, create: bool = True) -> list[HistoryEntry]: ...

    def events(self, ref: ActorRef, *, after: int = 0, follow: bool = True, create: bool = True
               ) -> AsyncIterator[EventRecord]: ...

    async def deliver(self, ref: ActorRef, message: InboxMessage, *, compare: bool = False) -> None: ...


class ActionShortcuts:
    """`handle.run_task(5)` is `handle.call("run_task", 5)`: for every handle, in-process or HTTP."""

    def __getattr__(self, action: str) -> Callable[..., Any]:
        if action.startswith("_"):
            raise AttributeError(action)
        call = cast(Callable[..., Awaitable[Any]], object.__getattribute__(self, "call"))

        async def invoke(*args: Any) -> Any:
            return await call(action, *args)

        return invoke


class ActorHandle(ActionShortcuts):
    """A handle to one actor. No I/O until the first request, which creates the actor (`get_or_create`), or, for
    a handle that never creates (`client.get`, `client.create`), raises ActorNotFoundError if it is missing.

    With a `caller`, every request is first put to the actor's authorization hook (ForbiddenError if it
    refuses), and the caller is recorded as the sender of messages and `c.caller` of actions."""

    def __init__(self, service: ActorOperations, ref: ActorRef, *, actor_input: Any = None,
                 ids: IdSource | None = None, caller: Caller | None = None, creates: bool = True) -> None:
        self._service = service
        self._input = actor_input
        self._ids = ids
        self._caller = caller
        self._creates = creates
        self._created = not creates  # a handle that never creates has nothing to create
        self.ref = ref

    async def _authorize(self, operation: Operation, target: str | None = None) -> None:
        if self._caller is not None:
            await self._service.authorize(self.ref, self._caller, operation, target)

    async def _ensure(self, operation: Operation) -> None:
        await self._authorize(operation)
        if not self._created:
            await self._service.ensure_created(self.ref, self._input, caller=self._caller)
            self._created = True

    async def send(self, queue: str, body: Any, *, wait: bool = False, timeout: float | None = None,
                   message_id: str | None = None) -> SendResult:
        """Send to a queue. `message_id` makes retries idempotent (a duplicate id is ignored)."""
        # No _ensure() first: a rejected message must not create the actor; the service creates it once
        # the message is known to be valid.
        await self._authorize("send", queue)
        derived = message_id is None and self._ids is not None  # a step's deterministic id: dedupe only
        mid = message_id or (self._ids() if self._ids else None)
        result = await self._service.send(self.ref, queue, body, wait=wait, timeout=timeout, message_id=mid,
                                          actor_input=self._input, sender=self._caller, derived_id=derived,
                                          create=self._creates)
        self._created = True
        return result

    async def send_many(self, queue: str, bodies: Sequence[Any], *,
                        message_ids: Sequence[str] | None = None) -> list[SendResult]:
        """Many messages to one queue at once, in order (up to 100): one request, the wake-ups sent together. All
        are checked first; `message_ids` (one per body) make a retried batch idempotent."""
        await self._authorize("send", queue)
        results = await self._service.send_many(self.ref, queue, bodies, message_ids=message_ids,
                                                actor_input=self._input, sender=self._caller, create=self._creates)
        self._created = True
        return results

    async def call(self, action: str, *args: Any) -> Any:
        await self._authorize("call", action)
        result = await self._service.call(self.ref, action, args, actor_input=self._input, caller=self._caller,
                                          create=self._creates)
        self._created = True
        return result

    async def state(self) -> Any:
        await self._ensure("state")
        return await self._service.state(self.ref, create=self._creates)

    async def status(self) -> ActorStatus:
        await self._ensure("status")
        return await self._service.status(self.ref, create=self._creates)

    async def history(self) -> list[HistoryEntry]:
        await self._ensure("history")
        return await self._service.history(self.ref, create=self._creates)

    async def events(self, *, after: int = 0, follow: bool = True) -> AsyncIterator[EventRecord]:
        await self._ensure("events")
        async for record in self._service.events(self.ref, after=after, follow=follow, create=self._creates):
            yield record

    # -- operator actions (dormant.runtime.operations): they never create the actor ---------------------
    async def resume(self) -> OperationResult:
        """Resume a diverged actor (after a fix) or retry a failed one from its failed step; wake any other."""
        return await Operator(self._service).resume(self.ref)

    async def terminate(self, reason: str | None = None) -> OperationResult:
        """End the workflow as `terminated`; later sends raise ActorFinishedError."""
        return await Operator(self._service).terminate(self.ref, reason)

    async def inbox(self, *, limit: int = 100) -> Inbox:
        """The messages waiting in the actor's inbox (queue messages, scheduled actions), in send order."""
        return await Operator(self._service).inbox(self.ref, limit=limit)

    async def delete(self) -> OperationResult:
        """Remove every item of the actor; the next request through a `get_or_create` handle creates it afresh
        (through a `get` or `create` handle: ActorNotFoundError)."""
        result = await Operator(self._service).delete(self.ref)
        self._created = not self._creates
        return result

    @property
    def _by(self) -> str | None:
        return str(self._caller) if self._caller is not None else None

    async def pause(self, reason: str | None = None) -> OperationResult:
        """Hold the actor: no wake-up runs it until `unpause()`; messages sent meanwhile are kept, timers keep
        their time; actions are refused (ActorPausedError)."""
        return await Operator(self._service).pause(self.ref, reason, by=self._by)

    async def unpause(self) -> OperationResult:
        """Let a paused actor run again: woken now, its waiting messages and due timers run."""
        return await Operator(self._service).unpause(self.ref, by=self._by)

    async def check_values(self, *, repair: bool = False) -> ValueCheck:
        """Its values kept outside its items (S3) checked; with `repair`, repaired where possible (`dormant
        doctor`; docs/operations.md, "Lost values")."""
        return await Operator(self._service).check_values(self.ref, repair=repair)

    async def versions(self) -> list[VersionInfo]:
        """The versions of the actor a fork or reset can start from, oldest first."""
        return await Operator(self._service).versions(self.ref)

    async def version(self, version: int) -> KeptVersion:
        """The actor as it was at a kept version: state, workflow record, history (no inbox)."""
        return await Operator(self._service).version(self.ref, version)

    async def fork(self, at: int, new_key: str | Sequence[str], *, reason: str | None = None,
                   paused: bool = False) -> OperationResult:
        """A new actor `new_key` from kept version `at` of this one (refused with the diff if this code would
        diverge from it, or if `new_key` exists); it runs on (`paused=True`: it waits for an unpause)."""
        key = (new_key,) if isinstance(new_key, str) else tuple(new_key)
        return await Operator(self._service).fork(self.ref, at, key, reason=reason, by=self._by, paused=paused)

    async def reset(self, to: int, *, reason: str | None = None) -> OperationResult:
        """Take this actor back to kept version `to`, in place (refused with the diff if this code would diverge
        from it); messages it received since are not given back (their ids are in the result)."""
        return await Operator(self._service).reset(self.ref, to, reason=reason, by=self._by)


class Client:
    """In-process client over the actor operations (an ActorService).

    Without a `caller` it is the application itself (tests, scripts, the runtime): no authorization hook is
    asked. `client.as_caller(caller)` (or `Client(service, caller=...)`) makes requests on someone's behalf."""

    def __init__(self, service: ActorOperations, *, ids: IdSource | None = None, caller: Caller | None = None
                 ) -> None:
        self._service = service
        self._ids = ids
        self.caller = caller

    def as_caller(self, caller: Caller | None) -> Client:
        """The same client, making its requests as `caller`."""
        return Client(self._service, ids=self._ids, caller=caller)

    def get_or_create(self, actor_name: str, key: str | Sequence[str], *, input: Any = None) -> ActorHandle:
        """A handle (no I/O): its first request creates the actor (with `input`) if it does not exist."""
        return ActorHandle(self._service, self._service.ref(actor_name, key), actor_input=input, ids=self._ids,
                           caller=self.caller)

    def get(self, actor_name: str, key: str | Sequence[str]) -> ActorHandle:
        """A handle (no I/O) that never creates: every request on a missing (or deleted) actor raises
        ActorNotFoundError, and nothing is stored."""
        return ActorHandle(self._service, self._service.ref(actor_name, key), ids=self._ids, caller=self.caller,
                           creates=False)

    async def create(self, actor_name: str, key: str | Sequence[str], *, input: Any = None) -> ActorHandle:
        """Create the actor now (on_create runs with `input`, its workflow starts) and return a handle that never
        creates; ActorExistsError if it exists already (nothing runs then)."""
        ref = self._service.ref(actor_name, key)
        if self.caller is not None:
            await self._service.authorize(ref, self.caller, "create")
        if not await self._service.ensure_created(ref, input, caller=self.caller):
            raise ActorExistsError("the actor exists already (client.get reaches it; delete it to start afresh)")
        return ActorHandle(self._service, ref, ids=self._ids, caller=self.caller, creates=False)

    # -- callbacks (ctx.callback): what the outside system does, by the token alone ---------------------------
    async def complete_callback(self, token: str, result: Any = None) -> CallbackStatus:
        """Complete a callback with `result` (validated against its declared model); `accepted` once stored."""
        return await CallbackOperations(self._service).complete(token, result)

    async def fail_callback(self, token: str, error: str | BaseException, message: str | None = None
                            ) -> CallbackStatus:
        """Fail a callback: its `cb.result()` raises CallbackFailedError (`error`: an exception, or a type name)."""
        return await CallbackOperations(self._service).fail(token, *error_parts(error, message))

    async def heartbeat_callback(self, token: str) -> CallbackStatus:
        """Say the outside system is still at work: moves the callback's heartbeat deadline (wakes nothing)."""
        return await CallbackOperations(self._service).heartbeat(token)

    async def callback_status(self, token: str) -> CallbackStatus:
        """Where a callback stands: open, completed, failed, timed_out, cancelled or expired."""
        return await CallbackOperations(self._service).status(token)

    # -- operator actions --------------------------------------------------------------------------------
    async def list_actors(self, actor_type: str, *, status: WorkflowState | str | None = None, limit: int = 100,
                          cursor: str | None = None, where: Sequence[str] | None = None) -> ActorPage:
        """One page of the actors of a type (optionally in one status); pass `cursor` on for the next. With `where`
        (search conditions such as `"customer=42"`, `"amount>100"`: dormant.core.search), only the actors whose search
        attributes satisfy all of them, ordered by the value of one of them, each with its `attributes`."""
        listed = WorkflowState(status) if status else None
        if where:
            return await search.search_actors(self._service, actor_type, where, status=listed, limit=limit,
                                              cursor=cursor)
        return await Operator(self._service).list_actors(actor_type, status=listed, limit=limit, cursor=cursor)

    async def actors(self, actor_type: str, *, status: WorkflowState | str | None = None,
                     where: Sequence[str] | None = None) -> AsyncIterator[ActorSummary]:
        """Every actor of a type (optionally in one status, optionally matching `where`), page after page."""
        listed = WorkflowState(status) if status else None
        found = (search.every_match(self._service, actor_type, where, status=listed) if where
                 else Operator(self._service).actors(actor_type, status=listed))
        async for summary in found:
            yield summary

    async def counts(self, actor_type: str, *, limit: int = 1000, where: Sequence[str] | None = None) -> ActorCounts:
        """How many actors of the type are listed in each status (each counted up to `limit`); with `where`, how many
        of those matching it (the first `limit` matches are counted)."""
        if where:
            return await search.match_counts(self._service, actor_type, where, limit=limit)
        return await Operator(self._service).counts(actor_type, limit=limit)

    async def attention(self, actor_type: str, *, limit: int = 20) -> AttentionList:
        """The actors of the type that need an operator: failed first, then diverged, rolling back, retrying."""
        return await Operator(self._service).attention(actor_type, limit=limit)

    async def resume_all(self, actor_type: str, *, status: WorkflowState | str | None = None,
                         page_size: int = 25) -> list[OperationResult]:
        """Resume every actor of a type (optionally in one status); refusals are reported per actor."""
        operator = Operator(self._service)
        listed = WorkflowState(status) if status else None
        return await every_result(lambda cursor: operator.resume_page(actor_type, status=listed, limit=page_size,
                                                                    cursor=cursor))

    async def pause_all(self, actor_type: str, *, status: WorkflowState | str | None = None,
                        reason: str | None = None, page_size: int = 25) -> list[OperationResult]:
        """Pause every live actor of a type (or those in `status`); refusals are reported per actor."""
        operator, by = Operator(self._service), str(self.caller) if self.caller else None
        listed = WorkflowState(status) if status else None
        return await every_result(lambda cursor: operator.pause_page(actor_type, status=listed, limit=page_size,
                                                                   cursor=cursor, reason=reason, by=by))

    async def unpause_all(self, actor_type: str, *, page_size: int = 25) -> list[OperationResult]:
        """Unpause every paused actor of a type; each is woken."""
        operator, by = Operator(self._service), str(self.caller) if self.caller else None
        return await every_result(lambda cursor: operator.unpause_page(actor_type, limit=page_size, cursor=cursor,
                                                                     by=by))
