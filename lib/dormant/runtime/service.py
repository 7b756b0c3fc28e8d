"""The actor operations behind every client: create, send, call, read. Shared by the
in-process client, step/action contexts, the runtime and the HTTP API.

Requests that both store something and wake the actor send the wake-up first, carrying what they store
(Transport.wake): a request cut off after it still completes when the wake-up runs (docs/semantics.md,
"A send is processed or not stored")."""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from pydantic_core import to_jsonable_python

from dormant.actor import ActorDefinition, Registry
from dormant.core.limits import check_message_id
from dormant.core.search import plain, stale, visible
from dormant.errors import (
    ActorFinishedError,
    ActorNotFoundError,
    ActorPausedError,
    IdempotencyConflictError,
    SendFailedError,
    StorageError,
    StorageRefusedError,
    TransportError,
    VersionConflict,
    WakeFailedError,
)
from dormant.models import ActorStatus, SendResult, WaitingFor
from dormant.ports import (
    ActorRef,
    ActorSnapshot,
    Clock,
    Creation,
    EventRecord,
    EventStore,
    InboxMessage,
    Transport,
)
from dormant.runtime import remedies, tracing
from dormant.runtime.access import AccessRequest, Operation, check_access
from dormant.runtime.batches import send_many
from dormant.runtime.callbacks import waiting_callbacks
from dormant.runtime.contexts import ActionContext, HookContext, call_hook
from dormant.runtime.creation import prepare_creation, stored_creation
from dormant.runtime.ids import deterministic_ids
from dormant.runtime.replies import await_reply
from dormant.runtime.send_rules import check_carried_size, send_rule
from dormant.runtime.waits import INLINE_WAIT
from dormant.workflow.caller import Caller
from dormant.workflow.execution import CommitDraft, to_json
from dormant.workflow.history import HistoryEntry, WorkflowRecord, WorkflowState
from dormant.workflow.state_cell import StateCell
from dormant.workflow.values import check_json

log = logging.getLogger("dormant.runtime.service")
DEFAULT_WAIT_TIMEOUT = 30.0
MAX_CONFLICT_RETRIES = 20
_WAITING = (WorkflowState.SLEEPING, WorkflowState.RUNNING)  # states whose record's `limits` are waited for now


class ActorService:
    """Application service over the ports; holds no per-actor state of its own."""

    def __init__(self, registry: Registry, store: EventStore, transport: Transport, clock: Clock, *,
                 public_url: str | None = None, inline_wait: float = INLINE_WAIT) -> None:
        """`public_url`: where the HTTP API is reached from outside (callback URLs: `cb.url`); `inline_wait`: the
        longest wait a wake-up makes in process with nothing else running (dormant.runtime.waits)."""
        self.registry = registry
        self.store = store
        self.transport = transport
        self.clock = clock
        self.public_url = public_url
        self.inline_wait = inline_wait

    def ref(self, actor_name: str, key: str | Sequence[str]) -> ActorRef:
        self.registry.get(actor_name)
        parts = (key,) if isinstance(key, str) else tuple(key)
        return ActorRef(name=actor_name, key=parts)

    async def authorize(self, ref: ActorRef, caller: Caller, operation: Operation, target: str | None = None
                        ) -> None:
        """Ask the actor's authorization hook; ForbiddenError if it refuses (nothing read or written)."""
        hook = self.registry.get(ref.name).authorize_fn
        await check_access(hook, AccessRequest(caller=caller, actor=ref.name, key=ref.key, operation=operation,
                                               target=target))

    # -- lifecycle ---------------------------------------------------------------------------
    async def ensure_created(self, ref: ActorRef, actor_input: Any = None, *, caller: Caller | None = None) -> bool:
        """Create the actor if needed: run on_create (`c.caller` is `caller`), store version 1, start its workflow."""
        if await self.store.exists(ref):
            return False
        return await self.create_actor(ref, actor_input, caller=caller)

    async def create_actor(self, ref: ActorRef, actor_input: Any = None, *, wake: bool = True,
                           caller: Caller | None = None) -> bool:
        """Create the actor (False if it exists); on_create sees `caller` as `c.caller`. With a workflow and
        `wake`, its wake-up goes first, carrying the input: if this request stops before the create, the
        wake-up creates the actor."""
        definition = self.registry.get(ref.name)
        input_json = to_json(actor_input, "the actor's input")
        prepared = await prepare_creation(self, definition, ref, input_json, caller)
        creation = await stored_creation(self.store, ref, prepared, Creation(input=input_json, caller=caller,
                                                                             requested_at=self.clock.now()))
        if wake and definition.workflow_fn is not None:
            check_carried_size(None, creation)
            await self.transport.wake(ref, reason="create", creation=creation)
        return await self.store.create(ref, prepared.meta, prepared.state, WorkflowRecord(), prepared.events,
                                       search=prepared.search)

    # -- queues ------------------------------------------------------------------------------
    async def send(self, ref: ActorRef, queue_name: str, body: Any, *, wait: bool = False,
                   timeout: float | None = None, message_id: str | None = None,
                   actor_input: Any = None, derived_id: bool = False, sender: Caller | None = None,
                   create: bool = True) -> SendResult:
        """Persist a message in the actor's inbox and wake it; optionally wait for `complete()` (`timeout` in
        seconds of the service's clock), or until it is clear that no answer will come. The workflow sees
        `sender` as the received message's `sender`.

        A `message_id` given by the caller is an idempotency key: the same id with the same queue and body
        is the same message, with another queue or body IdempotencyConflictError. Ids a step derives
        (`derived_id`) are only deduplicated: a re-run step re-sends, and the first send stands. Without `create`
        (`client.get`), a missing actor is ActorNotFoundError and nothing is stored."""
        definition = self.registry.get(ref.name)
        validated = definition.queue_spec(queue_name).validate_body(queue_name, body)
        if message_id is not None:
            check_message_id(message_id)
        message = InboxMessage(id=message_id or str(uuid.uuid4()), queue=queue_name,
                               body=to_json(validated, f'the body of queue "{queue_name}"'),
                               created_at=self.clock.now(), sender=sender, traceparent=tracing.traceparent())
        # One read, the actor's status item: whether it exists, and whether its workflow takes messages.
        summary = await self.store.read_summary(ref)
        creation = None
        state = WorkflowState.PENDING
        if summary is None and not create:
            raise ActorNotFoundError("the actor does not exist (client.get never creates one: client.create or "
                                     "get_or_create does)")
        if summary is None:  # created only once the message is known to be valid
            creation = Creation(input=to_json(actor_input, "the actor's input"), caller=sender,
                                requested_at=message.created_at)
        else:
            state = summary.status
        rule = send_rule(state)
        if rule == "refuse":
            raise ActorFinishedError(f"the actor is {state.value}: its workflow takes no more messages (delete the "
                                     "actor to start it afresh)")
        self.store.check_message(ref, message)  # nothing written yet: sizes, the per-value ceiling
        message = await self.store.prepare_message(ref, message)  # big values written first (S3), referred to
        new = await self._deliver(ref, message, creation=creation, compare=message_id is not None and not derived_id)
        if rule == "hold":
            return SendResult(status="queued", id=message.id, workflow=state)
        if not wait:
            return SendResult(status="queued", id=message.id)
        if not new:  # a resend of a stored id: its answer may be there already, a read now needs no schedule
            found, response = await self.store.wait_response(ref, message.id, 0)
            if found:
                return SendResult(status="completed", id=message.id, response=response)
        return await self.await_reply(ref, message.id, timeout or DEFAULT_WAIT_TIMEOUT)

    async def send_many(self, ref: ActorRef, queue_name: str, bodies: Sequence[Any], *,
                        message_ids: Sequence[str] | None = None, actor_input: Any = None,
                        sender: Caller | None = None, create: bool = True) -> list[SendResult]:
        """Many messages to one queue in one request (dormant.runtime.batches): all checked first, in order."""
        return await send_many(self, ref, queue_name, bodies, message_ids=message_ids, actor_input=actor_input,
                               sender=sender, create=create)

    async def await_reply(self, ref: ActorRef, message_id: str, timeout: float) -> SendResult:
        """Wait for the answer to a stored message, or until it is clear that none will come, at most `timeout`
        seconds of the service's clock (dormant.runtime.replies)."""
        return await await_reply(self.store, self.clock, ref, message_id, timeout)

    async def deliver(self, ref: ActorRef, message: InboxMessage, *, compare: bool = False) -> None:
        """Store a checked, prepared message of an existing actor as a send does (its wake-up first); with
        `compare`, IdempotencyConflictError when its id holds another message (a callback's completion)."""
        await self._deliver(ref, message, compare=compare)

    async def _deliver(self, ref: ActorRef, message: InboxMessage, *, creation: Creation | None = None,
                       at: float | None = None, compare: bool = False) -> bool:
        """The wake-up (carrying the message) first, then the actor's creation and the inbox write. False when the
        id was stored before (a duplicate: nothing new is stored)."""
        definition = self.registry.get(ref.name)
        prepared = None
        if creation is not None:  # on_create runs before anything is sent: if it raises, nothing happened
            prepared = await prepare_creation(self, definition, ref, creation.input, creation.caller)
            creation = await stored_creation(self.store, ref, prepared, creation)
        check_carried_size(message, creation)
        try:
            await self.transport.wake(ref, at=at, reason=f"message:{message.id}", message=message, creation=creation)
        except TransportError as error:
            log.warning("send to %s failed before anything was stored: %s", ref, error)
            raise SendFailedError("the message was not stored: the wake-up queue is unreachable; send it again",
                                  message_id=message.id, stored=False) from error
        try:
            if prepared is not None:
                await self.store.create(ref, prepared.meta, prepared.state, WorkflowRecord(), prepared.events,
                                        search=prepared.search)
            new = await self.store.enqueue(ref, message)
        except StorageRefusedError:  # the store refuses it: so will the worker, which drops it (runtime.wake)
            raise
        except StorageError as error:
            log.warning("send to %s: the store failed after the wake-up was sent: %s", ref, error)
            raise SendFailedError("the store failed, but the message's wake-up carries it: it will be stored and "
                                  "processed; sending it again with the same id is harmless",
                                  message_id=message.id, stored=True) from error
        if not new and compare:
            known = await self.store.message_fingerprint(ref, message.id)
            if known is not None and known != message.fingerprint():
                raise IdempotencyConflictError(
                    "this message id (Idempotency-Key) was already used for another message (another queue or "
                    "body); a new message needs a new id")
        return new

    async def schedule_action(self, ref: ActorRef, at: float, action: str, args: list[Any], *,
                              message_id: str | None = None, sender: Caller | None = None) -> str:
        definition = self.registry.get(ref.name)
        validated = definition.validate_arguments(action, args)
        if message_id is not None:
            check_message_id(message_id)
        message = InboxMessage(id=message_id or str(uuid.uuid4()), queue=action, kind="action",
                               args=to_json(validated, f'the arguments of action "{action}"'),
                               created_at=self.clock.now(), not_before=at, sender=sender)
        self.store.check_message(ref, message)
        message = await self.store.prepare_message(ref, message)
        await self._deliver(ref, message, at=at)
        return message.id

    # -- actions -----------------------------------------------------------------------------
    async def call(self, ref: ActorRef, action: str, args: Sequence[Any] = (), *, actor_input: Any = None,
                   caller: Caller | None = None, create: bool = True) -> Any:
        """Run an action (`c.caller` is `caller`); its state changes commit conditionally (a lost race re-runs
        it). Without `create`, a missing actor is ActorNotFoundError."""
        definition = self.registry.get(ref.name)
        fn = definition.action_fn(action)
        args = definition.validate_arguments(action, args)  # before anything is read, created or run
        _check_arguments(action, args)
        ids = f"{ref.id}|action|{uuid.uuid4()}"
        for _ in range(MAX_CONFLICT_RETRIES):
            # Created (on_create, workflow started) only now that the action is known to exist.
            snapshot = await self._load(ref, create=create, actor_input=actor_input, caller=caller)
            if snapshot.workflow.state is WorkflowState.PAUSED:  # (a pause after this load wins the commit race)
                raise ActorPausedError("the actor is paused by an operator: actions are refused until it is "
                                       "unpaused (messages sent to it are kept and run then)")
            try:
                result, _ = await self._run_action(definition, snapshot, fn, list(args), ids, consumed=None,
                                                   caller=caller)
            except VersionConflict:
                continue
            return result
        raise WakeFailedError(f'action "{action}" lost {MAX_CONFLICT_RETRIES} version races in a row; retry it')

    async def run_scheduled(self, definition: ActorDefinition, snapshot: ActorSnapshot,
                            message: InboxMessage) -> None:
        """Run a due scheduled action, consuming its inbox message in the same commit.

        An action that raises (or whose arguments no longer fit it) is consumed with nothing else committed
        and logged: retrying it on every wake-up would block the actor for good."""
        try:
            fn = definition.action_fn(message.queue)
            args = definition.validate_arguments(message.queue, message.args)
            await self._run_action(definition, snapshot, fn, args, f"{snapshot.ref.id}|{message.id}",
                                   consumed=message.id, caller=message.sender)
        except StorageRefusedError as error:  # its changes cannot be stored: like any other failure, dropped
            log.error("scheduled action %s of %s failed and is dropped: its commit cannot be stored: %s",
                      message.queue, snapshot.ref, error)
            await self.store.commit(snapshot.ref, snapshot.version, CommitDraft(
                upserts=[], deleted_prefixes=[], state=None, consumed_ids=[message.id], responses={}, events=[],
                workflow=None, committed_at=self.clock.now()))
        except (StorageError, TransportError, VersionConflict):
            raise
        except Exception as error:
            log.error("scheduled action %s of %s failed and is dropped: %s: %s", message.queue, snapshot.ref,
                      type(error).__name__, error)
            await self.store.commit(snapshot.ref, snapshot.version, CommitDraft(
                upserts=[], deleted_prefixes=[], state=None, consumed_ids=[message.id], responses={}, events=[],
                workflow=None, committed_at=self.clock.now()))

    async def _run_action(self, definition: ActorDefinition, snapshot: ActorSnapshot, fn: Any, args: list[Any],
                          id_seed: str, consumed: str | None, caller: Caller | None = None) -> tuple[Any, int]:
        cell = StateCell(definition.state, snapshot.state)
        events: list[tuple[str, Any]] = []
        # An action is a wake-up of its own: vars are rebuilt and the lifecycle hooks run around it.
        vars = definition.vars() if definition.vars else None
        hooks = HookContext(snapshot.ref, vars)
        await call_hook(definition.on_wake_fn, hooks)
        changes: dict[str, Any] = {}
        context = ActionContext(service=self, definition=definition, ref=snapshot.ref, state=cell,
                                vars=vars, events=events, ids=deterministic_ids(id_seed),
                                actor_input=snapshot.meta.input, caller=caller,
                                search=visible(definition.search, snapshot.search), search_changes=changes)
        try:
            result = fn(context, *args)
            if inspect.isawaitable(result):
                result = await result
        finally:
            await call_hook(definition.on_sleep_fn, hooks)
        state = cell.check(f'action "{getattr(fn, "__name__", "?")}"')  # invalid state: nothing commits
        draft = CommitDraft(upserts=[], deleted_prefixes=[], state=state if state != cell.committed else None,
                            consumed_ids=[consumed] if consumed else [], responses={}, events=events, workflow=None,
                            committed_at=self.clock.now(), search=changes or None)
        version = snapshot.version
        if not draft.is_empty():
            # Attributes a later declaration dropped or retyped are unset with the actor's next commit.
            draft.search = {**stale(definition.search, snapshot.search), **changes} or None
            version = await self.store.commit(snapshot.ref, snapshot.version, draft)
        return result, version

    # -- reads -------------------------------------------------------------------------------
    async def _load(self, ref: ActorRef, *, create: bool = False, actor_input: Any = None,
                    caller: Caller | None = None) -> ActorSnapshot:
        snapshot = await self.store.load(ref)
        if snapshot is None and create:  # requests through a handle create the actor (one read when it exists)
            await self.create_actor(ref, actor_input, caller=caller)
            snapshot = await self.store.load(ref)
        if snapshot is None:
            raise ActorNotFoundError("the actor does not exist")
        # (A created actor's wake-up was sent before its creation, so none is missing: no wake here.)
        return snapshot

    async def state(self, ref: ActorRef, *, create: bool = True) -> Any:
        """The actor's state (created first unless `create` is False: then ActorNotFoundError if missing)."""
        definition = self.registry.get(ref.name)
        return definition.state.model_validate((await self._load(ref, create=create)).state)

    async def status(self, ref: ActorRef, *, create: bool = True) -> ActorStatus:
        snapshot = await self._load(ref, create=create)
        record = snapshot.workflow
        error = None
        if record.error is not None:
            error = f"{record.error.type}: {record.error.message}"
        if record.divergence is not None:
            error = record.divergence.message
        wake_error = snapshot.wake_error
        if error is None and wake_error is not None and (wake_error.version is None
                                                         or wake_error.version >= snapshot.version):
            # Shown until a later commit: the last wake-up failed (a poison message is on its way to the DLQ).
            error = f"wake-up failed ({wake_error.receive_count} receive(s)): {wake_error.message}"
        definition = self.registry.get(ref.name)
        compensated = remedies.compensation(snapshot.history, record)
        return ActorStatus(workflow=record.state, error=error, divergence=record.divergence, output=record.output,
                           version=snapshot.version, search=plain(visible(definition.search, snapshot.search)),
                           paused=record.paused, rewritten=record.rewritten, compensation=compensated,
                           remedies=remedies.remedies(record, compensated, workflow=definition.workflow_fn is not None),
                           advice=remedies.advice(record, compensated),
                           waiting_for=WaitingFor(queues=record.waiting_for, deadline=record.deadline,
                                                  retry_at=record.retry_at,
                                                  limits=record.limits if record.state in _WAITING else [],
                                                  callbacks=await waiting_callbacks(self.store, snapshot.history)))

    async def history(self, ref: ActorRef, *, create: bool = True) -> list[HistoryEntry]:
        return sorted((await self._load(ref, create=create)).history, key=lambda e: e.seq)

    async def events(self, ref: ActorRef, *, after: int = 0, wait: float = DEFAULT_WAIT_TIMEOUT,
                     follow: bool = True, create: bool = True) -> AsyncIterator[EventRecord]:
        """Events in order from cursor `after`; with `follow`, keep waiting for new ones. Without `create`, a
        missing actor is ActorNotFoundError."""
        if create:
            await self.ensure_created(ref)
        elif not await self.store.exists(ref):
            raise ActorNotFoundError("the actor does not exist")
        cursor = after
        while True:
            batch = await (self.store.wait_events(ref, cursor, wait) if follow
                           else self.store.read_events(ref, cursor, 1000))
            for record in batch:
                cursor = record.seq
                yield record
            if not follow and not batch:
                return


def _check_arguments(action: str, args: Sequence[Any]) -> None:
    """Action arguments cross the JSON-safety check too (in process, values with no JSON form pass)."""
    try:
        converted = to_jsonable_python(list(args), fallback=lambda _: None)
    except UnicodeEncodeError:
        converted = list(args)
    check_json(converted, f'the arguments of action "{action}"')
