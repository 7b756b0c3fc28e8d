"""Pause and unpause an actor (docs/operations.md, "Pause and unpause").

- **pause** is one commit, conditional on the version read like any other: the workflow's state becomes `paused`
  and `WorkflowRecord.paused` records who paused it, why, when and the state it was in. Nothing else changes: its
  deadlines, retry time and the queues it waits on stay on the record. A wake-up under way loses its next commit's
  version race, reads the actor again and stops.
- **while paused** every wake-up (a message, a timer, a redelivery) loads the actor, sees the mark and stops with
  nothing run and nothing committed (dormant.runtime.wake). Sends are stored and held, as for a failed actor (202
  with `workflow: paused`); scheduled actions stay in the inbox; actions (`call`) and resumes are refused (409
  `actor_paused`): an action runs the actor's code and changes its state, which a pause is there to hold still.
  Reads answer; terminate and delete work as ever; a reset keeps the actor paused.
- **unpause** is one commit back to the state the pause left, then a wake-up now: the messages that arrived run,
  each consumed once by the commit that records it; timers that came due during the pause fire at once (the record
  kept their deadlines), and the timer of a deadline still ahead is sent again (the one sent before the pause is
  still on its way: a second one is harmless, one lost would not be); due scheduled actions run.

A finished actor (completed, terminated) cannot be paused (409 `actor_finished`); pausing a paused actor, or
unpausing one that is not paused, changes nothing (`unchanged`; an unpause then still wakes it).
"""

from __future__ import annotations

from dormant.errors import ActorFinishedError, VersionConflict, WakeFailedError
from dormant.models import OperationResult
from dormant.ports import FINISHED, ActorRef
from dormant.runtime.outcomes import MAX_RACES, OperatorHost, load_existing, result
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import OperatorNote, WorkflowRecord, WorkflowState


def describe_pause(note: OperatorNote) -> str:
    """`by dev:ana (incident 42)`: who paused it and why, for messages."""
    who = f"by {note.by}" if note.by else "by the application"
    return who + (f" ({note.reason})" if note.reason else "")


async def pause(host: OperatorHost, ref: ActorRef, *, reason: str | None = None, by: str | None = None
                ) -> OperationResult:
    """Pause the actor (see the module docstring); ActorFinishedError for an ended one."""
    host.registry.get(ref.name)
    for _ in range(MAX_RACES):
        snapshot = await load_existing(host, ref)
        record = snapshot.workflow
        if record.state in FINISHED:
            raise ActorFinishedError(f"the actor is {record.state.value}: its workflow has ended, there is nothing "
                                     "to pause")
        if record.state is WorkflowState.PAUSED and record.paused is not None:
            return result(ref, "pause", "unchanged", record.state, f"already paused {describe_pause(record.paused)}")
        now = host.clock.now()
        note = OperatorNote(action="pause", by=by, reason=reason, at=now, previous=record.state)
        try:
            await host.store.commit(ref, snapshot.version, _record_only(record.model_copy(update={
                "state": WorkflowState.PAUSED, "paused": note}), now))
        except VersionConflict:
            continue
        waiting = sum(1 for m in snapshot.inbox if m.kind == "queue")
        return result(ref, "pause", "paused", record.state,
                      f"{record.state.value} -> paused {describe_pause(note)}; no wake-up runs it until unpaused "
                      f"({waiting} waiting message(s) stay in its inbox)")
    raise WakeFailedError(f"pause of {ref} lost {MAX_RACES} version races in a row")


async def unpause(host: OperatorHost, ref: ActorRef, *, by: str | None = None) -> OperationResult:
    """Restore the state the pause left and wake the actor now (see the module docstring)."""
    host.registry.get(ref.name)
    for _ in range(MAX_RACES):
        snapshot = await load_existing(host, ref)
        record = snapshot.workflow
        if record.state is not WorkflowState.PAUSED or record.paused is None:
            if record.state not in FINISHED:
                await host.transport.wake(ref, reason=f"unpause:{snapshot.version}")
            return result(ref, "unpause", "unchanged", record.state, f"not paused ({record.state.value})"
                          + ("" if record.state in FINISHED else ": woken"))
        previous = record.paused.previous or WorkflowState.SLEEPING
        restored = record.model_copy(update={"state": previous, "paused": None})
        now = host.clock.now()
        try:
            version = await host.store.commit(ref, snapshot.version, _record_only(restored, now))
        except VersionConflict:
            continue
        await wake_restored(host, ref, restored, f"unpause:{version}")
        waiting = sum(1 for m in snapshot.inbox if m.kind == "queue")
        who = f"by {by}" if by else "by the application"
        held = f"{now - record.paused.at:.1f} s" if now >= record.paused.at else "a while"
        return result(ref, "unpause", "unpaused", WorkflowState.PAUSED,
                      f"paused -> {previous.value}, unpaused {who} (paused {describe_pause(record.paused)} for "
                      f"{held}); woken: {waiting} waiting message(s) run now")
    raise WakeFailedError(f"unpause of {ref} lost {MAX_RACES} version races in a row")


async def wake_restored(host: OperatorHost, ref: ActorRef, record: WorkflowRecord, reason: str) -> None:
    """Wake an actor that may run again now, and send again the timers of its deadlines still ahead."""
    await host.transport.wake(ref, reason=reason)
    now = host.clock.now()
    for moment in {record.deadline, record.retry_at}:
        if moment is not None and moment > now:
            await host.transport.wake(ref, at=moment)


def _record_only(record: WorkflowRecord, now: float) -> CommitDraft:
    return CommitDraft(upserts=[], deleted_prefixes=[], state=None, consumed_ids=[], responses={}, events=[],
                       workflow=record, committed_at=now)
