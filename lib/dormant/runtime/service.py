"""The actor operations behind every client: create, send, call, read. Shared by the
in-process client, step/action contexts, the runtime and (later) the HTTP API."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from dormant.actor import ActorDefinition, Registry
from dormant.errors import ActorFinishedError, ActorNotFoundError, VersionConflict, WakeFailedError
from dormant.models import ActorStatus, SendResult, WaitingFor
from dormant.ports import (
    FINISHED,
    ActorMeta,
    ActorRef,
    ActorSnapshot,
    Clock,
    EventRecord,
    EventStore,
    InboxMessage,
    Transport,
)
from dormant.runtime.access import AccessRequest, Operation, check_access
from dormant.runtime.contexts import ActionContext, HookContext, call_hook
from dormant.runtime.ids import deterministic_ids
from dormant.workflow.caller import Caller
from dormant.workflow.execution import CommitDraft, StateCell, to_json
from dormant.workflow.history import HistoryEntry, WorkflowRecord, WorkflowState

DEFAULT_WAIT_TIMEOUT = 30.0
MAX_CONFLICT_RETRIES = 20


class ActorService:
    """Application service over the ports; holds no per-actor state of its own."""

    def __init__(self, registry: Registry, store: EventStore, transport: Transport, clock: Clock) -> None:
        self.registry = registry
        self.store = store
        self.transport = transport
        self.clock = clock

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
        definition = self.registry.get(ref.name)
        cell = StateCell(definition.state, definition.initial_state().model_dump(mode="json"))
        events: list[tuple[str, Any]] = []
        input_json = to_json(actor_input)
        if definition.on_create_fn is not None:
            context = ActionContext(service=self, definition=definition, ref=ref, state=cell,
                                    vars=definition.vars() if definition.vars else None, events=events,
                                    ids=deterministic_ids(f"{ref.id}|on_create"), actor_input=input_json,
                                    caller=caller)
            result = definition.on_create_fn(context)
            if inspect.isawaitable(result):
                await result
        meta = ActorMeta(name=ref.name, key=ref.key, created_at=self.clock.now(), input=input_json)
        created = await self.store.create(ref, meta, cell.dump(), WorkflowRecord(), events)
        if definition.workflow_fn is not None:  # also when a concurrent creator won: waking twice is harmless
            await self.transport.wake(ref, reason="create")
        return created

    # -- queues ------------------------------------------------------------------------------
    async def send(self, ref: ActorRef, queue_name: str, body: Any, *, wait: bool = False,
                   timeout: float | None = None, message_id: str | None = None,
                   actor_input: Any = None, sender: Caller | None = None) -> SendResult:
        """Persist a message in the actor's inbox and wake it; optionally wait for `complete()`. The workflow
        sees `sender` as the received message's `sender`."""
        definition = self.registry.get(ref.name)
        validated = definition.queue_spec(queue_name).validate_body(queue_name, body)
        await self.refuse_finished(ref, actor_input, caller=sender)
        message = InboxMessage(id=message_id or str(uuid.uuid4()), queue=queue_name, body=to_json(validated),
                               created_at=self.clock.now(), sender=sender)
        await self.store.enqueue(ref, message)
        await self.transport.wake(ref, reason=f"message:{message.id}")
        if not wait:
            return SendResult(status="queued", id=message.id)
        found, response = await self.store.wait_response(ref, message.id, timeout or DEFAULT_WAIT_TIMEOUT)
        if not found:
            return SendResult(status="timedOut", id=message.id)
        return SendResult(status="completed", id=message.id, response=response)

    async def refuse_finished(self, ref: ActorRef, actor_input: Any = None, *, caller: Caller | None = None) -> None:
        """The one rule for sends to an ended workflow: ActorFinishedError. Otherwise the actor is created if it
        does not exist (only once the message is known to be valid). One read: the actor's status item."""
        summary = await self.store.read_summary(ref)
        if summary is None:
            await self.ensure_created(ref, actor_input, caller=caller)
        elif summary.status in FINISHED:
            raise ActorFinishedError(f"actor {ref} is {summary.status.value}: its workflow takes no more messages "
                                     "(delete the actor to start it afresh)")

    async def schedule_action(self, ref: ActorRef, at: float, action: str, args: list[Any], *,
                              message_id: str | None = None, sender: Caller | None = None) -> str:
        self.registry.get(ref.name).action_fn(action)
        message = InboxMessage(id=message_id or str(uuid.uuid4()), queue=action, kind="action",
                               args=to_json(args), created_at=self.clock.now(), not_before=at, sender=sender)
        await self.store.enqueue(ref, message)
        await self.transport.wake(ref, at=at, reason=f"message:{message.id}")
        return message.id

    # -- actions -----------------------------------------------------------------------------
    async def call(self, ref: ActorRef, action: str, args: Sequence[Any] = (), *, actor_input: Any = None,
                   caller: Caller | None = None) -> Any:
        """Run an action (`c.caller` is `caller`); its state changes commit conditionally (a lost race re-runs
        it)."""
        definition = self.registry.get(ref.name)
        fn = definition.action_fn(action)
        ids = f"{ref.id}|action|{uuid.uuid4()}"
        for _ in range(MAX_CONFLICT_RETRIES):
            # Created (on_create, workflow started) only now that the action is known to exist.
            snapshot = await self._load(ref, create=True, actor_input=actor_input, caller=caller)
            try:
                result, _ = await self._run_action(definition, snapshot, fn, list(args), ids, consumed=None,
                                                   caller=caller)
            except VersionConflict:
                continue
            return result
        raise WakeFailedError(f"action {action} on {ref} lost {MAX_CONFLICT_RETRIES} version races in a row")

    async def run_scheduled(self, definition: ActorDefinition, snapshot: ActorSnapshot,
                            message: InboxMessage) -> None:
        """Run a due scheduled action, consuming its inbox message in the same commit."""
        fn = definition.action_fn(message.queue)
        await self._run_action(definition, snapshot, fn, message.args, f"{snapshot.ref.id}|{message.id}",
                               consumed=message.id, caller=message.sender)

    async def _run_action(self, definition: ActorDefinition, snapshot: ActorSnapshot, fn: Any, args: list[Any],
                          id_seed: str, consumed: str | None, caller: Caller | None = None) -> tuple[Any, int]:
        cell = StateCell(definition.state, snapshot.state)
        events: list[tuple[str, Any]] = []
        # An action is a wake-up of its own: vars are rebuilt and the lifecycle hooks run around it.
        vars = definition.vars() if definition.vars else None
        hooks = HookContext(snapshot.ref, vars)
        await call_hook(definition.on_wake_fn, hooks)
        context = ActionContext(service=self, definition=definition, ref=snapshot.ref, state=cell,
                                vars=vars, events=events, ids=deterministic_ids(id_seed),
                                actor_input=snapshot.meta.input, caller=caller)
        try:
            result = fn(context, *args)
            if inspect.isawaitable(result):
                result = await result
        finally:
            await call_hook(definition.on_sleep_fn, hooks)
        state = cell.dump()
        draft = CommitDraft(upserts=[], deleted_prefixes=[], state=state if state != cell.committed else None,
                            consumed_ids=[consumed] if consumed else [], responses={}, events=events, workflow=None,
                            committed_at=self.clock.now())
        version = snapshot.version
        if not draft.is_empty():
            version = await self.store.commit(snapshot.ref, snapshot.version, draft)
        return result, version

    # -- reads -------------------------------------------------------------------------------
    async def _load(self, ref: ActorRef, *, create: bool = False, actor_input: Any = None,
                    caller: Caller | None = None) -> ActorSnapshot:
        snapshot = await self.store.load(ref)
        if snapshot is None and create:  # requests through a handle create the actor (one read when it exists)
            await self.ensure_created(ref, actor_input, caller=caller)
            snapshot = await self.store.load(ref)
        if snapshot is None:
            raise ActorNotFoundError(f"actor {ref} does not exist yet")
        if snapshot.workflow.state is WorkflowState.PENDING and self.registry.get(ref.name).workflow_fn is not None:
            # Created but never woken: the creator may have crashed between the create and its wake-up.
            # A duplicate wake-up is harmless, a missing one would leave the workflow unstarted.
            await self.transport.wake(ref, reason="create")
        return snapshot

    async def state(self, ref: ActorRef) -> Any:
        definition = self.registry.get(ref.name)
        return definition.state.model_validate((await self._load(ref, create=True)).state)

    async def status(self, ref: ActorRef) -> ActorStatus:
        snapshot = await self._load(ref, create=True)
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
        return ActorStatus(workflow=record.state, error=error, divergence=record.divergence, output=record.output,
                           version=snapshot.version,
                           waiting_for=WaitingFor(queues=record.waiting_for, deadline=record.deadline,
                                                  retry_at=record.retry_at))

    async def history(self, ref: ActorRef) -> list[HistoryEntry]:
        return sorted((await self._load(ref, create=True)).history, key=lambda e: e.seq)

    async def events(self, ref: ActorRef, *, after: int = 0, wait: float = DEFAULT_WAIT_TIMEOUT,
                     follow: bool = True) -> AsyncIterator[EventRecord]:
        """Events in order from cursor `after`; with `follow`, keep waiting for new ones."""
        await self.ensure_created(ref)
        cursor = after
        while True:
            batch = await (self.store.wait_events(ref, cursor, wait) if follow
                           else self.store.read_events(ref, cursor, 1000))
            for record in batch:
                cursor = record.seq
                yield record
            if not follow and not batch:
                return
