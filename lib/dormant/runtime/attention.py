"""Which actors need an operator: the dashboard's "needs attention" list, and the marks that find retrying ones.

Failed, diverged and compensating actors are found by their listed status (one listing Query each). Retrying ones
are listed as `sleeping`, so the store keeps an *attention mark* for them (dormant.ports.AttentionMark): a wake-up
marks its actor when a retry starts (a step, or a compensation, waits for its `retry_at`) and clears the mark when
the retry has ended; the worker marks an actor whose wake-up failed. Marks are written after the commit or the
failure they follow and are advisory: the list confirms each one on the actor's own records and clears a stale one
(a crash between a commit and its mark loses the mark until that actor's next retry).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dormant.models import AttentionActor, AttentionKind, AttentionList
from dormant.ports import ActorRef, ActorSnapshot, AttentionMark, EventStore, WakeError
from dormant.workflow.history import EntryKind, EntryStatus, WorkflowRecord, WorkflowState

if TYPE_CHECKING:
    from dormant.actor import Registry

log = logging.getLogger(__name__)
LISTED_FIRST: tuple[tuple[WorkflowState, AttentionKind], ...] = (
    (WorkflowState.FAILED, "failed"), (WorkflowState.DIVERGED, "diverged"),
    (WorkflowState.ROLLING_BACK, "rolling_back"))
LIVE = (WorkflowState.PENDING, WorkflowState.SLEEPING, WorkflowState.RUNNING, WorkflowState.ROLLING_BACK)


def current_wake_error(snapshot: ActorSnapshot) -> WakeError | None:
    """The last failed wake-up, while no commit came after it (what status shows)."""
    error = snapshot.wake_error
    if error is not None and (error.version is None or error.version >= snapshot.version):
        return error
    return None


async def track_retry(store: EventStore, ref: ActorRef, before: WorkflowRecord, had_wake_error: bool,
                      after: WorkflowRecord | None, committed: bool, now: float) -> None:
    """After a wake-up: mark the actor when a retry started, clear its mark when the retry (or the failed
    wake-up it was marked for) is over. Writes only on those changes; best effort (logged, never raised)."""
    retrying = after is not None and after.retry_at is not None and after.state in LIVE
    was_retrying = before.retry_at is not None
    try:
        if retrying and not was_retrying:
            await store.mark_attention(ref, "retry", now)
        elif not retrying and (was_retrying or (had_wake_error and committed)):
            await store.clear_attention(ref)
    except Exception as error:  # the commit is done; a lost mark only hides the actor from the attention list
        log.warning("could not update the attention mark of %s: %r", ref, error)


async def mark_wake_error(store: EventStore, ref: ActorRef, at: float) -> None:
    """The worker recorded a failed wake-up of `ref`: list it as needing attention (best effort)."""
    try:
        await store.mark_attention(ref, "wake_error", at)
    except Exception as error:
        log.warning("could not mark %s as needing attention: %r", ref, error)


async def attention_list(registry: Registry, store: EventStore, actor_type: str, *, limit: int) -> AttentionList:
    """The actors of a type that need an operator: failed, diverged, rolling back (by listing), then the confirmed
    marks (retrying, wake errors), at most `limit` of each group. Costs one listing Query per group, one for the
    marks, and one load per mark."""
    registry.get(actor_type)  # UnknownActorError for a type this code does not serve
    found: list[AttentionActor] = []
    truncated = False
    for status, reason in LISTED_FIRST:
        page = await store.list_actors(actor_type, status=status, limit=limit)
        truncated = truncated or (page.cursor is not None and len(page.actors) >= limit)
        found += [AttentionActor(name=s.name, key=list(s.key), reason=reason, status=s.status, since=s.since)
                  for s in page.actors]
    marks = await store.list_attention(actor_type, limit=limit)
    truncated = truncated or (marks.cursor is not None and len(marks.marks) >= limit)
    for mark in marks.marks:
        confirmed = await _confirm(store, mark)
        if confirmed is not None:
            found.append(confirmed)
    return AttentionList(actors=found, truncated=truncated)


async def _confirm(store: EventStore, mark: AttentionMark) -> AttentionActor | None:
    """The marked actor as it is now, or None (and the mark cleared) when the mark is stale."""
    ref = ActorRef(name=mark.name, key=mark.key)
    snapshot = await store.load(ref)
    if snapshot is None:
        await store.clear_attention(ref, since=mark.since)
        return None
    record = snapshot.workflow
    if record.state not in LIVE:  # failed or diverged (listed by status) or finished: the mark has served
        await store.clear_attention(ref, since=mark.since)
        return None
    if record.state is WorkflowState.ROLLING_BACK:
        return None  # listed as rolling back (the mark stays: its compensation retries)
    error = current_wake_error(snapshot)
    if error is not None:
        return AttentionActor(name=ref.name, key=list(ref.key), reason="wake_error", status=record.state,
                              since=error.at, detail=f"wake-up failed ({error.receive_count} receive(s)): "
                                                     f"{error.message}")
    if record.retry_at is not None:
        return AttentionActor(name=ref.name, key=list(ref.key), reason="retrying", status=record.state,
                              since=mark.since, detail=_retry_detail(snapshot, record.retry_at))
    await store.clear_attention(ref, since=mark.since)
    return None


def _retry_detail(snapshot: ActorSnapshot, retry_at: float) -> str:
    steps = [e for e in snapshot.history
             if e.kind is EntryKind.STEP and e.status is EntryStatus.PENDING and e.retry_at is not None]
    if not steps:
        return "waits for a retry"
    step = min(steps, key=lambda e: e.retry_at or retry_at)
    error = f": {step.error.type}: {step.error.message}" if step.error is not None else ""
    return f"step {step.location} failed {step.attempts} attempt(s){error}"
