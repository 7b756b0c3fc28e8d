"""Fork and reset: an actor started again from a version its store still keeps (docs/operations.md, "Fork and
reset"; which versions are kept: dormant.runtime.versions).

Both first replay the kept version's history, offline, against the code deployed here (nothing runs, as for the
resume of a diverged actor), and refuse with the diff (WouldDivergeError, 409 `would_diverge`) if that code would
diverge from it: nothing is stored then.

- **fork** creates a new actor of the same type (refused if the key exists: ActorExistsError) with the kept
  version's input, state, history and workflow record, and wakes it: it runs on from there, with the code deployed
  here. Its inbox, events and responses start empty: the source's messages stay the source's. It is written through
  the normal write path (values too big for an item go under the new actor's S3 prefix) in two commits: the create,
  holding the actor paused with the note "being forked", then the commit of the history and of the kept version's
  search attributes (so the fork is found by them: `dormant actors list --where`). A fork cut off between the two
  leaves the new actor paused with that note; running the same fork again finishes it.
- **reset** gives an actor a kept version's history, state, search attributes and workflow record back, in one commit
  on its current version: the entries recorded since are deleted, and who reset it, why and from which version is
  kept on its record (`rewritten`, shown by status and `history show`). Messages waiting in its inbox stay and run.
  Messages the workflow received after that version are not given back: their ids are in the result, for the
  operator to send again those that should run (the bodies are in the history of the versions still kept, which a
  fork at the current version keeps too). Scheduled actions and actions that ran since are undone with the state. A
  paused actor stays paused; any other is woken.

Deadlines are absolute: a sleep or timeout that passed since the kept version fires as soon as the actor runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from dormant.core.search import changes_to
from dormant.errors import (
    ActorExistsError,
    ActorNotFoundError,
    VersionConflict,
    WakeFailedError,
    WouldDivergeError,
)
from dormant.models import OperationResult
from dormant.ports import ActorMeta, ActorRef, ActorSnapshot, VersionInfo
from dormant.runtime.offline import replay_snapshot
from dormant.runtime.outcomes import MAX_RACES, OperatorHost, load_existing, result
from dormant.runtime.pausing import wake_restored
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import HistoryEntry, OperatorNote, WorkflowRecord, WorkflowState

SHOWN_IDS = 10  # message ids a reset's result lists


async def kept_version(host: OperatorHost, ref: ActorRef, version: int) -> ActorSnapshot:
    """Kept version `version` of the actor; ActorNotFoundError, VersionNotRetainedError."""
    host.registry.get(ref.name)
    snapshot = await host.store.load_version(ref, version)
    if snapshot is None:
        raise ActorNotFoundError("the actor does not exist")
    return snapshot


async def check_replays(host: OperatorHost, snapshot: ActorSnapshot, what: str) -> None:
    """WouldDivergeError (with the diff) unless the version's history replays against the code deployed here."""
    report = await replay_snapshot(host.registry, snapshot)
    if report.outcome == "diverged":
        raise WouldDivergeError(
            f"{what} refused: version {snapshot.version} of {snapshot.ref} does not replay against the code deployed "
            f"here, so the actor would diverge at once (nothing was stored):\n{report.detail}",
            divergence=report.divergence.model_dump(mode="json") if report.divergence else {})


def running_record(record: WorkflowRecord, note: OperatorNote) -> WorkflowRecord:
    """A kept version's record as the actor takes it back: not paused (a pause belongs to the moment it was made,
    not to the version), the operator's note on it."""
    if record.state is WorkflowState.PAUSED:
        previous = record.paused.previous if record.paused and record.paused.previous else WorkflowState.SLEEPING
        record = record.model_copy(update={"state": previous})
    return record.model_copy(update={"paused": None, "rewritten": note})


def held(record: WorkflowRecord, pause: OperatorNote) -> WorkflowRecord:
    """`record`, paused by `pause` (which then restores the record's own state)."""
    return record.model_copy(update={"state": WorkflowState.PAUSED,
                                     "paused": pause.model_copy(update={"previous": record.state})})


# -- fork ---------------------------------------------------------------------------------------------------
async def fork(host: OperatorHost, ref: ActorRef, version: int, new_key: Sequence[str], *, reason: str | None = None,
               by: str | None = None, paused: bool = False) -> OperationResult:
    """A new actor `new_key` from kept version `version` of `ref`, woken (or left paused with `paused`)."""
    target = ActorRef(name=ref.name, key=tuple(new_key))  # InvalidKeyError for a key that cannot name an actor
    if target.id == ref.id:
        raise ActorExistsError("a fork needs a new key: this one is the actor's own (to go back in place, reset it)")
    snapshot = await kept_version(host, ref, version)
    await check_replays(host, snapshot, "fork")
    now = host.clock.now()
    origin = f"forked from {ref} at version {version}"
    note = OperatorNote(action="fork", by=by, reason=reason, at=now, version=version, detail=origin)
    holding = OperatorNote(action="fork", by=by, at=now, version=version, previous=WorkflowState.PENDING,
                           detail=f"being forked: {origin} (if it stays so, run the same fork again to finish it)")
    record = running_record(snapshot.workflow, note)
    if paused:
        record = held(record, OperatorNote(action="pause", by=by, reason=reason or "forked paused", at=now))
    draft = CommitDraft(upserts=[e.model_dump(mode="json", exclude_defaults=True) for e in snapshot.history],
                        deleted_prefixes=[], state=None, consumed_ids=[], responses={}, events=[], workflow=record,
                        committed_at=now, search=changes_to({}, snapshot.search) or None)
    meta = ActorMeta(name=target.name, key=target.key, created_at=now, input=snapshot.meta.input)
    host.store.check_creation(target, meta, snapshot.state, [])  # sizes first: nothing is stored if they fail
    host.store.check_commit(target, 1, draft)
    base = await _created(host, target, meta, snapshot.state, holding)
    try:
        await host.store.commit(target, base, draft)
    except VersionConflict:
        raise ActorExistsError("the new actor changed while it was being forked (another fork, or a request to "
                               "it, got there first): look at it before forking again") from None
    if not paused:
        await wake_restored(host, target, record, f"fork:{ref.id}:{version}")
    entries = len(snapshot.history)
    then = "left paused (unpause it to run it)" if paused else "woken: it runs on with the code deployed here"
    return result(target, "fork", "forked", snapshot.workflow.state,
                  f"{origin} ({entries} history entries, its state and input; an empty inbox); {then}")


async def _created(host: OperatorHost, target: ActorRef, meta: ActorMeta, state: dict[str, object],
                   holding: OperatorNote) -> int:
    """Create the fork held paused (or find the one an interrupted run of this same fork left); its version."""
    stored = meta.model_copy(update={"input": await host.store.prepare_input(target, meta.input)})
    record = WorkflowRecord(state=WorkflowState.PAUSED, paused=holding)
    if await host.store.create(target, stored, dict(state), record, []):
        return 1
    existing = await host.store.load(target)
    left = existing.workflow.paused if existing is not None else None
    if (existing is not None and existing.version == 1 and left is not None and left.action == "fork"
            and left.detail == holding.detail):
        return 1  # an interrupted run of this fork: finish it
    raise ActorExistsError("an actor with the new key exists already (a fork creates a new actor: delete that one "
                           "first, or pick another key)")


# -- reset --------------------------------------------------------------------------------------------------
async def reset(host: OperatorHost, ref: ActorRef, version: int, *, reason: str | None = None,
                by: str | None = None) -> OperationResult:
    """Give `ref` kept version `version`'s history, state and record back, in place (see the module docstring)."""
    kept = await kept_version(host, ref, version)
    await check_replays(host, kept, "reset")
    for _ in range(MAX_RACES):
        current = await load_existing(host, ref)
        if current.version == version:
            return result(ref, "reset", "unchanged", current.workflow.state, f"the actor is at version {version}")
        versions = await host.store.retained_versions(ref) or []
        now = host.clock.now()
        note = OperatorNote(action="reset", by=by, reason=reason, at=now, version=version,
                            detail=f"reset from version {current.version} to version {version}")
        record = running_record(kept.workflow, note)
        pause = current.workflow.paused if current.workflow.state is WorkflowState.PAUSED else None
        if pause is not None:
            record = held(record, pause)
        upserts, deleted = _rewrite(current.history, kept.history)
        draft = CommitDraft(upserts=upserts, deleted_prefixes=deleted, state=kept.state, consumed_ids=[],
                            responses={}, events=[], workflow=record, committed_at=now,
                            search=changes_to(current.search, kept.search) or None)
        try:
            new_version = await host.store.commit(ref, current.version, draft)
        except VersionConflict:
            continue
        if pause is None:
            await wake_restored(host, ref, record, f"reset:{new_version}")
        return result(ref, "reset", "reset", current.workflow.state,
                      _reset_words(current, version, deleted, _received_after(versions, version), pause is not None))
    raise WakeFailedError(f"reset of {ref} lost {MAX_RACES} version races in a row")


def _rewrite(now: Sequence[HistoryEntry], then: Sequence[HistoryEntry]) -> tuple[list[dict[str, object]], list[str]]:
    """The upserts and deleted locations that turn history `now` into `then`: entries recorded since are deleted,
    changed ones written back; an entry under a deleted location is written back even if unchanged."""
    old = {e.location: e.model_dump(mode="json", exclude_defaults=True) for e in then}
    current = {e.location: e.model_dump(mode="json", exclude_defaults=True) for e in now}
    deleted = sorted(location for location in current if location not in old)
    under = tuple(location + "/" for location in deleted)
    upserts = [entry for location, entry in old.items()
               if current.get(location) != entry or location.startswith(under)]
    return upserts, deleted


def _received_after(versions: list[VersionInfo], version: int) -> list[str]:
    found: dict[str, None] = {}
    for info in versions:
        if info.version > version:
            found.update(dict.fromkeys(info.received or ()))
    return list(found)


def _reset_words(current: ActorSnapshot, version: int, deleted: list[str], received: list[str], paused: bool) -> str:
    gone = f"{len(deleted)} history entr{'y' if len(deleted) == 1 else 'ies'} recorded since deleted"
    words = f"version {current.version} -> version {version}: state and history as they were then ({gone})"
    if received:
        shown = ", ".join(received[:SHOWN_IDS]) + (" ..." if len(received) > SHOWN_IDS else "")
        words += (f"; {len(received)} message(s) received after version {version} are not given back ({shown}): "
                  "send again those that should run")
    waiting = sum(1 for m in current.inbox if m.kind == "queue")
    if paused:
        return words + f"; still paused ({waiting} waiting message(s) run once it is unpaused)"
    return words + f"; woken ({waiting} waiting message(s) run now)"
