"""Fire an actor's next timer now (`dormant fire-timer`, the dashboard's button; served only by `dormant dev`).

A user who wants to see a 24-hour timeout fire should not have to edit their code. The actor's next due time is
the earliest of: a sleep's deadline (`ctx.sleep`, `sleep_until`, a race's timer branch), a `queue.next(timeout=)`
deadline, a callback's timeout, a step's or a compensation's `retry_at`, and a scheduled action's due time. Firing it
moves that time to now in one commit (conditional on the version read, like any commit), then wakes the actor: the
workflow sees the deadline as reached, exactly as if the clock had got there, and since the history records the
moved time, every later replay agrees. A scheduled action is run at once instead (consumed in the same commit as its
effects, as when it falls due). Timers that fall due together are fired together.

A wake-up that is already waiting for that deadline in process (deadlines within its time budget) notices only
when its wait ends: its commit then loses the version race, and the wake-up re-runs against the fired time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dormant.errors import ActorFinishedError, ActorNotFoundError, NoTimerError, VersionConflict, WakeFailedError
from dormant.models import OperationResult
from dormant.ports import FINISHED, ActorRef, ActorSnapshot, InboxMessage
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import (
    SEPARATOR,
    BranchStatus,
    EntryKind,
    EntryStatus,
    HistoryEntry,
    WorkflowRecord,
    WorkflowState,
)

if TYPE_CHECKING:
    from dormant.runtime.service import ActorService

MAX_RACES = 20  # lost version races before it gives up (as the operator actions)
FIREABLE = (WorkflowState.PENDING, WorkflowState.SLEEPING, WorkflowState.RUNNING, WorkflowState.ROLLING_BACK)


@dataclass(frozen=True)
class Timer:
    at: float
    what: str
    location: str | None = None  # the history entry that holds it
    field: str = "deadline"  # that entry's field: deadline or retry_at
    action: InboxMessage | None = None  # a scheduled action


def pending_timers(snapshot: ActorSnapshot) -> list[Timer]:
    """Every time the actor waits for, earliest first."""
    history = snapshot.history
    branching = {e.location: e for e in history if e.kind in (EntryKind.JOIN, EntryKind.RACE, EntryKind.MAP_ITEM)}
    record = snapshot.workflow
    found: list[Timer] = []
    for entry in history:
        if entry.status is not EntryStatus.PENDING or _settled_branch(entry.location, branching):
            continue
        if entry.kind is EntryKind.SLEEP and entry.deadline is not None:
            found.append(Timer(entry.deadline, f"sleep {entry.location}", entry.location))
        elif entry.kind is EntryKind.MESSAGE and entry.deadline is not None:
            found.append(Timer(entry.deadline, f"the timeout of queue wait {entry.location}", entry.location))
        elif entry.kind is EntryKind.CALLBACK and entry.deadline is not None:
            # (its heartbeat deadline is not fired: heartbeats move it, in the callback's lookup record)
            found.append(Timer(entry.deadline, f"the timeout of callback {entry.location}", entry.location))
        elif entry.kind is EntryKind.STEP and entry.retry_at is not None:
            found.append(Timer(entry.retry_at, f"the retry of step {entry.location}", entry.location, "retry_at"))
        elif (entry.kind is EntryKind.STEP and entry.throttled_since is not None and record.limits
              and record.deadline is not None):  # its next try is the record's deadline (nothing in the entry)
            found.append(Timer(record.deadline, f"the next try of step {entry.location} for a slot of limit "
                                                f"{', '.join(record.limits)}"))
    if record.state is WorkflowState.ROLLING_BACK and record.retry_at is not None:
        found.append(Timer(record.retry_at, "the retry of the compensation"))
    for message in snapshot.inbox:
        if message.kind == "action" and message.not_before is not None:
            found.append(Timer(message.not_before, f"scheduled action {message.queue} ({message.id})",
                               action=message))
    return sorted(found, key=lambda timer: timer.at)


def _settled_branch(location: str, by_location: dict[str, HistoryEntry]) -> bool:
    """True when the entry lies in a join/race branch or a map item that has ended (a race's loser, a decided
    map's cancelled item, keeps its pending timer)."""
    parts = location.split(SEPARATOR)
    for cut in range(1, len(parts) - 1):
        parent = by_location.get(SEPARATOR.join(parts[:cut]))
        branch = parent.branches.get(parts[cut]) if parent is not None else None
        if branch is not None and branch.status is not BranchStatus.PENDING:
            return True
        item = by_location.get(SEPARATOR.join(parts[:cut + 1]))
        if item is not None and item.kind is EntryKind.MAP_ITEM and item.status is not EntryStatus.PENDING:
            return True
    return False


def _moved(snapshot: ActorSnapshot, due: list[Timer], now: float) -> tuple[list[HistoryEntry], WorkflowRecord]:
    entries = {e.location: e for e in snapshot.history}
    changed = [entries[t.location].model_copy(update={t.field: now}) for t in due if t.location is not None]
    first = due[0].at
    record = snapshot.workflow
    update: dict[str, float] = {}
    if record.deadline is not None and record.deadline <= first:
        update["deadline"] = now
    if record.retry_at is not None and record.retry_at <= first:
        update["retry_at"] = now
    return changed, record.model_copy(update=update)


async def fire_next_timer(service: ActorService, ref: ActorRef) -> OperationResult:
    """Fire the actor's next timer(s) now and wake it; NoTimerError when it waits for none."""
    definition = service.registry.get(ref.name)
    for _ in range(MAX_RACES):
        snapshot = await service.store.load(ref)
        if snapshot is None:
            raise ActorNotFoundError("the actor does not exist")
        state = snapshot.workflow.state
        if state in FINISHED:
            raise ActorFinishedError(f"the actor is {state.value}: it has no timers left")
        timers = pending_timers(snapshot)
        if not timers:
            waits = snapshot.workflow.waiting_for
            what = (f"it waits for a message on {', '.join(waits)} without a timeout" if waits
                    else "nothing is scheduled")
            raise NoTimerError(f"the actor ({state.value}) has no timer to fire: {what}")
        if state not in FIREABLE:
            unblocks = "unpauses" if state is WorkflowState.PAUSED else "resumes"
            raise NoTimerError(f"the actor is {state.value}: its timers wait until an operator {unblocks} it")
        due = [t for t in timers if t.at == timers[0].at]
        now = service.clock.now()
        try:
            if due[0].action is not None:
                await service.run_scheduled(definition, snapshot, due[0].action)
                due = due[:1]  # one scheduled action per commit; its wake-up runs any others that are due
            else:
                entries, record = _moved(snapshot, due, now)
                draft = CommitDraft(upserts=[e.model_dump(mode="json", exclude_defaults=True) for e in entries],
                                    deleted_prefixes=[], state=None, consumed_ids=[], responses={}, events=[],
                                    workflow=record, committed_at=now)
                await service.store.commit(ref, snapshot.version, draft)
        except VersionConflict:
            continue
        await service.transport.wake(ref, reason=f"fire-timer:{snapshot.version}")
        early = max(0.0, due[0].at - now)
        return OperationResult.model_validate({
            "actor": ref.name, "key": list(ref.key), "operation": "fire_timer", "outcome": "fired", "status": state,
            "message": ", ".join(t.what for t in due) + f": due now ({_span(early)} early); the actor is woken"})
    raise WakeFailedError(f"fire-timer of {ref} lost {MAX_RACES} version races in a row")


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
