"""One wake-up of one actor: load -> run due scheduled actions -> replay and advance the
workflow -> commit (conditionally on the version read) -> schedule the next wake-up."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dormant.actor import ActorDefinition
from dormant.core.search import stale, visible
from dormant.errors import InvalidMessageIdError, StorageRefusedError, VersionConflict, WakeFailedError
from dormant.ports import ActorRef, ActorSnapshot, Creation, InboxMessage
from dormant.runtime.attention import current_wake_error, track_retry
from dormant.runtime.callbacks import callback_url, new_token
from dormant.runtime.collector import relaxed_collector
from dormant.runtime.contexts import HookContext, StepContext, call_hook
from dormant.runtime.failure_record import failure_mark
from dormant.runtime.ids import deterministic_ids
from dormant.runtime.service import MAX_CONFLICT_RETRIES, ActorService
from dormant.runtime.slots import LimitSlots
from dormant.runtime.waits import WakeWaits, horizon
from dormant.workflow.execution import Execution
from dormant.workflow.history import QueuedMessage, WorkflowRecord, WorkflowState
from dormant.workflow.host import CommitDraft, StepRun
from dormant.workflow.runner import TERMINAL, run_workflow
from dormant.workflow.signals import WakeAborted, WakeRestart
from dormant.workflow.state_cell import StateCell

log = logging.getLogger("dormant.runtime.wake")
MAX_SCHEDULED_PER_WAKE = 100  # due scheduled actions one wake-up runs before its workflow


@dataclass
class WakeReport:
    """What one wake-up did (for logs, tests and benchmarks)."""

    ref: ActorRef
    outcome: str
    record: WorkflowRecord | None = None
    commits: int = 0
    replayed: int = 0
    attempts: int = 1
    next_wake: float | None = None
    consumed: dict[str, float] = field(default_factory=dict)
    """Message ids the actor had consumed by the end of this wake-up, each with a time on the service clock by
    which it was: the start of the load that saw it consumed (held, no longer pending), or of the commit that
    consumed it."""


class ActorHost:
    """The engine's view of one actor during one wake-up (implements WorkflowHost)."""

    def __init__(self, service: ActorService, definition: ActorDefinition, snapshot: ActorSnapshot,
                 state: StateCell, vars: Any, version: Callable[[], int], search: dict[str, Any]) -> None:
        self._service = service
        self._search = search  # the execution's live search attributes (Execution.search)
        self._version = version
        self._definition = definition
        self._snapshot = snapshot
        self._state = state
        self._vars = vars
        self._queue_names = sorted(definition.queues)
        slots = LimitSlots(service, snapshot.ref)  # flow control (dormant.runtime.slots)
        # The slots' own methods (WorkflowHost's check_limit, acquire_limit, release_limit): no call in between
        self.check_limit, self.acquire_limit, self.release_limit = slots.check, slots.acquire, slots.release
        # (WorkflowHost's optional value_ceiling: the store's, found on its type, so a wrapper that forwards
        # attributes to a store is never taken for it)
        ceiling = getattr(type(service.store), "commit_value_ceiling", None)
        self.value_ceiling: int | None = ceiling() if ceiling is not None else None

    def queue_names(self) -> list[str]:
        return self._queue_names

    def decode_body(self, queue: str, body: Any) -> Any:
        return self._definition.queue_spec(queue).decode(body)

    def encode_response(self, queue: str, response: Any) -> Any:
        return self._definition.queue_spec(queue).validate_response(queue, response)

    def check_commit(self, draft: CommitDraft) -> None:
        self._service.store.check_commit(self._snapshot.ref, self._version(), draft)

    def callback_names(self) -> list[str]:
        return sorted(self._definition.callbacks)

    def decode_callback_result(self, name: str, value: Any) -> Any:
        return self._definition.callback_spec(name).decode(value)

    def new_callback_token(self, location: str) -> str:
        return new_token()

    def callback_url(self, token: str) -> str | None:
        return callback_url(self._service.public_url, token)

    def step_context(self, run: StepRun) -> StepContext:
        ref = self._snapshot.ref
        return StepContext(run=run, service=self._service,
                           definition=self._definition, ref=ref, state=self._state, vars=self._vars,
                           events=run.events, ids=deterministic_ids(f"{ref.id}|{run.location}"),
                           actor_input=self._snapshot.meta.input, search=self._search)


async def wake_actor(service: ActorService, ref: ActorRef, *, budget: float | None = None,
                     messages: Sequence[InboxMessage] = (), creation: Creation | None = None,
                     redelivered: bool = True) -> WakeReport:
    """Run one wake-up of `ref`. Storage errors propagate (the transport redelivers the wake-up).

    `budget`: seconds of wall time the wake-up may still use (the AWS worker passes what is left of the
    Lambda invocation); None means dormant.runtime.waits.DEFAULT_WAKE_BUDGET. It bounds waits made in the
    running wake-up instead of suspending (docs/semantics.md, "In-process waits").

    `messages` and `creation`: what the wake-up messages carried (see Transport.wake); whatever of it the
    store lacks is stored first, so a send that was cut off between its wake-up and its own write is
    completed here.

    `redelivered=False` says that no message behind this wake-up was delivered before (the transport knows): the
    timer of a deadline that an earlier wake-up committed is then not sent again (see `_schedule_next`)."""
    with relaxed_collector():
        return await _wake(service, ref, horizon(service.clock.now(), budget), messages, creation, redelivered)


async def _wake(service: ActorService, ref: ActorRef, wait_horizon: float, messages: Sequence[InboxMessage],
                creation: Creation | None, redelivered: bool) -> WakeReport:
    definition = service.registry.get(ref.name)
    carried = bool(messages) or creation is not None
    before: WorkflowRecord | None = None  # the workflow as committed before this wake-up began
    had_wake_error = False  # the last wake-up before this one failed (and nothing was committed since)
    serial = False
    race_winners: dict[str, str] = {}  # kept across attempts: see Execution.race_winners
    attempt = lost_races = scheduled_runs = 0
    # Only lost version races count against MAX_CONFLICT_RETRIES: due scheduled actions have their
    # own budget (the rest wait for the next wake-up), and a serial re-run cannot restart again.
    while lost_races < MAX_CONFLICT_RETRIES:
        attempt += 1
        loaded_at = service.clock.now()
        snapshot = await service.store.load(ref)
        if carried:
            carried = False
            snapshot = await _complete_requests(service, ref, snapshot, messages, creation)
        if snapshot is None:
            return WakeReport(ref=ref, outcome="missing", attempts=attempt)
        if before is None:
            before = snapshot.workflow
            had_wake_error = current_wake_error(snapshot) is not None
        if snapshot.workflow.state is WorkflowState.PAUSED:
            # Held by an operator (dormant.runtime.pausing): nothing runs, nothing commits, no timer is sent; what
            # woke it stays stored (messages in the inbox, deadlines on the record) until the unpause wakes it.
            return WakeReport(ref=ref, outcome="paused", record=snapshot.workflow, attempts=attempt)
        now = service.clock.now()
        due = [m for m in snapshot.inbox if m.kind == "action" and (m.not_before or 0.0) <= now]
        try:
            if due and scheduled_runs < MAX_SCHEDULED_PER_WAKE:
                scheduled_runs += 1
                await service.run_scheduled(definition, snapshot, due[0])
                continue  # re-read: one scheduled action per commit, in inbox order
            report = await _run_workflow_once(service, definition, snapshot, serial, race_winners, wait_horizon)
        except VersionConflict:
            lost_races += 1
            continue
        except WakeAborted as aborted:
            if isinstance(aborted.cause, VersionConflict):
                lost_races += 1
                continue
            if isinstance(aborted.cause, StorageRefusedError):
                # A commit the store cannot hold, with no step to blame (a step's too-big result or state fails
                # that step's attempt before this: Execution.check_storable). Retrying the wake-up would fail on
                # every receive; the actor fails with the error instead, visible and resumable after a fix.
                return await _fail_unstorable(service, ref, aborted.cause, attempt)
            raise aborted.cause from None
        except WakeRestart:
            serial = True
            continue
        report.attempts = attempt
        held = snapshot.held_ids - {m.id for m in snapshot.inbox} if snapshot.inbox else snapshot.held_ids
        if held:  # (one dict made in C, not a call per id: up to the store's RECENTLY_CONSUMED ids per wake-up)
            report.consumed = {**dict.fromkeys(held, loaded_at), **report.consumed}
        await _schedule_next(service, snapshot, report, None if redelivered else before)
        await track_retry(service.store, ref, before, had_wake_error, report.record,
                          committed=report.commits > 0 or scheduled_runs > 0, now=service.clock.now())
        return report
    raise WakeFailedError(f"wake-up of {ref} lost {MAX_CONFLICT_RETRIES} version races in a row")


async def _fail_unstorable(service: ActorService, ref: ActorRef, error: StorageRefusedError,
                           attempt: int) -> WakeReport:
    """Record the actor `failed` with `error` (nothing else of the wake-up's unstored work is kept: the messages
    it would have consumed stay in the inbox). `dormant resume` runs the workflow again from its last commit.

    The commit adds nothing but a record of at most RECORD_ROOM bytes (`failure_mark`), which the stores always
    take, however close to the item limit the history has grown (dormant.core.limits, RECORD_ROOM)."""
    log.error("%s failed: a commit of its workflow cannot be stored: %s", ref, error)
    for _ in range(MAX_CONFLICT_RETRIES):
        snapshot = await service.store.load(ref)
        if snapshot is None:
            return WakeReport(ref=ref, outcome="missing", attempts=attempt)
        record = failure_mark(snapshot.workflow, error)
        try:
            await service.store.commit(ref, snapshot.version, CommitDraft(
                upserts=[], deleted_prefixes=[], state=None, consumed_ids=[], responses={}, events=[],
                workflow=record, committed_at=service.clock.now()))
        except VersionConflict:
            continue
        return WakeReport(ref=ref, outcome=WorkflowState.FAILED.value, record=record, commits=1, attempts=attempt)
    raise WakeFailedError(f"recording the failure of {ref} lost {MAX_CONFLICT_RETRIES} version races in a row")


async def _complete_requests(service: ActorService, ref: ActorRef, snapshot: ActorSnapshot | None,
                             messages: Sequence[InboxMessage], creation: Creation | None) -> ActorSnapshot | None:
    """Store what the wake-ups carried and the store lacks: the actor (if a request meant to create it) and
    messages whose ids the load did not see. On the normal path both were written by the request itself,
    the load shows them, and this writes nothing."""
    deleted: list[float | None] = []  # when the actor was last deleted, read at most once (a rare path)

    async def deleted_after(moment: float | None) -> bool:
        """Whether a deletion came after a request made at `moment`: the delete wins over it."""
        if not deleted:
            deleted.append(await service.store.deleted_at(ref))
        return deleted[0] is not None and moment is not None and moment <= deleted[0]

    if snapshot is None:
        if creation is None:
            return None
        requested = creation.requested_at
        if requested is None:  # a wake-up sent before creations carried their time: its message's
            requested = min((message.created_at for message in messages), default=None)
        if await deleted_after(requested):
            log.info("not creating %s from its wake-up: the actor was deleted after that request", ref)
            return None
        log.info("creating %s from its wake-up (the request that sent it did not get to)", ref)
        try:
            await service.create_actor(ref, creation.input, wake=False, caller=creation.caller)
        except (StorageRefusedError, InvalidMessageIdError) as error:
            # Only a wake-up sent before these checks existed can carry what the store refuses; its request was
            # answered with the refusal. Retrying it would fail on every receive.
            log.error("the creation of %s carried by its wake-up cannot be stored and is dropped: %s", ref, error)
            return None
        snapshot = await service.store.load(ref)
        if snapshot is None:
            return None
    missing = [message for message in messages if message.id not in snapshot.held_ids]
    if not missing:
        return snapshot
    late = [message for message in missing if await deleted_after(message.created_at)]
    if late:  # sent to an earlier life of the actor: never delivered to this one
        log.info("dropped %d message(s) of %s sent before it was deleted", len(late), ref)
        missing = [message for message in missing if message not in late]
        if not missing:
            return snapshot
    stored = 0
    for message in missing:
        try:
            if await service.store.enqueue(ref, message):
                stored += 1
        except (StorageRefusedError, InvalidMessageIdError) as error:  # as for a creation, above
            log.error("message %s of %s carried by its wake-up cannot be stored and is dropped: %s", message.id,
                      ref, error)
    if stored:
        log.info("stored %d message(s) of %s from their wake-ups (the sends did not get to)", stored, ref)
    # Read again even if none was stored here: the send that was still under way stored it meanwhile (the
    # usual case when a wake-up overtakes its send), and this wake-up is the one that must consume it.
    return await service.store.load(ref)


async def _run_workflow_once(service: ActorService, definition: ActorDefinition, snapshot: ActorSnapshot,
                             serial: bool, race_winners: dict[str, str], wait_horizon: float) -> WakeReport:
    if definition.workflow_fn is None:
        return WakeReport(ref=snapshot.ref, outcome="no-workflow", record=snapshot.workflow)
    if snapshot.workflow.state in TERMINAL:
        return WakeReport(ref=snapshot.ref, outcome="finished", record=snapshot.workflow)
    state = StateCell(definition.state, snapshot.state)
    vars = definition.vars() if definition.vars else None
    hook_context = HookContext(snapshot.ref, vars)
    version = snapshot.version
    consumed: dict[str, float] = {}
    search = visible(definition.search, snapshot.search)
    retired = stale(definition.search, snapshot.search)  # dropped or retyped by this deploy: unset, riding along

    async def commit(draft: CommitDraft) -> None:
        nonlocal version, retired
        if retired:
            draft.search, retired = {**retired, **(draft.search or {})}, {}
        started = service.clock.now()  # what it consumes was read (so stored) before
        version = await service.store.commit(snapshot.ref, version, draft)
        consumed.update(dict.fromkeys(draft.consumed_ids, started))

    # The workflow's deadline counts from the actor's creation (the request that created it started its workflow), on
    # the runtime's clock; no wait of this wake-up goes on past it.
    timeout = definition.workflow_timeout
    deadline = snapshot.meta.created_at + timeout if timeout is not None else None
    inbox = [QueuedMessage(id=m.id, name=m.queue, body=m.body, created_at=m.created_at, sender=m.sender,
                           kind="callback" if m.kind == "callback" else "queue")
             for m in snapshot.inbox if m.kind != "action"]
    execution = Execution(host=ActorHost(service, definition, snapshot, state, vars, lambda: version, search),
                          entries=snapshot.history, search=search,
                          record=snapshot.workflow, state=state, inbox=inbox, now=service.clock.now,
                          checkpointer=commit, serial=serial, workflow_input=snapshot.meta.input,
                          race_winners=race_winners, deadline=deadline,
                          waits=WakeWaits(service.clock, service.store, snapshot.ref,
                                          horizon=wait_horizon if deadline is None else min(wait_horizon, deadline),
                                          known=[m.id for m in snapshot.inbox], inline_wait=service.inline_wait))
    snapshot.history = []  # the execution holds its own copies: let the loaded models go during the run
    # After the engine has read the stored history (a corrupted entry fails the wake-up before any user code runs),
    # before the workflow runs.
    await call_hook(definition.on_wake_fn, hook_context)
    try:
        record = await run_workflow(definition.workflow_fn, execution)
    finally:
        await call_hook(definition.on_sleep_fn, hook_context)
    log.debug("woke %s: %s, %d commit(s), %d replayed", snapshot.ref, record.state.value, execution.commits,
              execution.replayed)
    return WakeReport(ref=snapshot.ref, outcome=record.state.value, record=record, commits=execution.commits,
                      replayed=execution.replayed, consumed=consumed)


async def _schedule_next(service: ActorService, snapshot: ActorSnapshot, report: WakeReport,
                         committed_before: WorkflowRecord | None = None) -> None:
    """Timers: the workflow's deadline or retry time, and the next scheduled action.

    A deadline (or retry time) that was already committed before this wake-up began had its timer sent by the
    wake-up that committed it, so it is not sent again when `committed_before` is given: a burst of messages
    to a sleeping actor no longer sends a timer per message. If that earlier wake-up died between its commit
    and its timer, its own message is redelivered, and a redelivered wake-up passes None here and sends it."""
    times: list[float] = []
    record = report.record
    if record is not None:
        for field in ("deadline", "retry_at"):
            moment = getattr(record, field)
            if moment is not None and (committed_before is None or getattr(committed_before, field) != moment):
                times.append(moment)
    # Scheduled actions still due here were left over by MAX_SCHEDULED_PER_WAKE: wake again now.
    times += [max(m.not_before or 0.0, service.clock.now()) for m in snapshot.inbox if m.kind == "action"]
    if times:
        report.next_wake = min(times)
        await service.transport.wake(snapshot.ref, at=report.next_wake)
