"""Operator actions over the ports: list actors, resume, terminate and delete them (docs/operations.md).

- **resume** a diverged actor: its history is first replayed offline against the code deployed here (nothing
  runs); if that code still diverges the resume is refused with the diff, else the actor is woken and its
  waiting messages run. A **failed** actor is retried from its failed step: in one commit the failure record
  is replaced, the failed steps (and failed join/race branches) start over with a fresh attempt count, and the
  workflow is runnable again; then it is woken. An actor whose failure was compensated (its rollback handlers
  ran) is not retried: its completed steps were undone. Any other live actor is simply woken.
- **terminate**: one commit ends the workflow as `terminated` (its queue messages still waiting are discarded
  in that commit); sends to it are refused from then on.
- **delete**: every item of the actor is removed (EventStore.delete); a later request starts a new actor.
- **inspect**: counts per listed status, the actors that need attention (dormant.runtime.attention), an actor's
  pending inbox; and, under `dormant dev`, firing its next timer (dormant.runtime.timers).
- **pause / unpause** (dormant.runtime.pausing) and **fork / reset** from a kept version (dormant.runtime.rewind;
  which versions are kept: dormant.runtime.versions).

Single-actor refusals raise (NotResumableError, StillDivergedError, ActorFinishedError, ActorPausedError,
ActorNotFoundError, ...); bulk resumes, pauses and unpauses report them per actor.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any

from dormant.core.cursors import every_summary
from dormant.errors import (
    ActorFinishedError,
    ActorNotFoundError,
    ActorPausedError,
    NotResumableError,
    StillDivergedError,
    VersionConflict,
    WakeFailedError,
)
from dormant.models import (
    ActorCounts,
    AttentionList,
    Inbox,
    KeptVersion,
    OperationPage,
    OperationResult,
    PendingMessage,
    StatusCount,
    ValueCheck,
)
from dormant.ports import (
    FINISHED,
    LISTED_STATUSES,
    ActorPage,
    ActorRef,
    ActorSnapshot,
    ActorSummary,
    InboxMessage,
    VersionInfo,
)
from dormant.runtime import doctor, pausing, remedies, rewind
from dormant.runtime.attention import attention_list
from dormant.runtime.offline import replay_snapshot
from dormant.runtime.outcomes import MAX_RACES, OperatorHost, load_existing
from dormant.runtime.outcomes import result as _result
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import (
    SEPARATOR,
    BranchRecord,
    BranchStatus,
    EntryKind,
    EntryStatus,
    ErrorInfo,
    HistoryEntry,
    WorkflowRecord,
    WorkflowState,
)

PREVIEW_CHARS = 200  # of a pending message's body in the inbox view


def reset_failure(history: Sequence[HistoryEntry], record: WorkflowRecord) -> tuple[list[HistoryEntry], WorkflowRecord]:
    """The entries and record that retry a failed workflow: failed steps and failed branches start over, and so do
    failed maps, from their failed and cancelled items (their succeeded items stand, the rest start in turn)."""
    changed: list[HistoryEntry] = []
    failed_maps = {e.location for e in history if e.kind is EntryKind.MAP and e.status is EntryStatus.FAILED}
    for entry in history:
        if entry.location in failed_maps:
            changed.append(entry.model_copy(update={"status": EntryStatus.PENDING, "error": None}))
            continue
        if (entry.kind is EntryKind.MAP_ITEM and entry.status in (EntryStatus.FAILED, EntryStatus.CANCELLED)
                and entry.location.rpartition(SEPARATOR)[0] in failed_maps):
            changed.append(entry.model_copy(update={"status": EntryStatus.PENDING, "error": None, "output": None}))
            continue
        if entry.kind is EntryKind.STEP and entry.status is EntryStatus.FAILED:
            changed.append(entry.model_copy(update={"status": EntryStatus.PENDING, "attempts": 0, "error": None,
                                                    "retry_at": None, "failure_kind": None}))
        elif entry.kind in (EntryKind.JOIN, EntryKind.RACE) and any(
                branch.status is BranchStatus.FAILED for branch in entry.branches.values()):
            branches = {name: BranchRecord() if branch.status is BranchStatus.FAILED else branch
                        for name, branch in entry.branches.items()}
            changed.append(entry.model_copy(update={"branches": branches, "status": EntryStatus.PENDING}))
    runnable = record.model_copy(update={"state": WorkflowState.SLEEPING, "error": None, "divergence": None,
                                         "waiting_for": [], "deadline": None, "retry_at": None,
                                         "rollback_attempts": 0})
    return changed, runnable


class Operator:
    """The operator actions over one ActorService (or anything with its ports and registry)."""

    def __init__(self, host: OperatorHost) -> None:
        self.host = host

    # -- listing -------------------------------------------------------------------------------------
    async def list_actors(self, actor_type: str, *, status: WorkflowState | None = None, limit: int = 100,
                          cursor: str | None = None) -> ActorPage:
        self.host.registry.get(actor_type)  # UnknownActorError for a type this code does not serve
        return await self.host.store.list_actors(actor_type, status=status, limit=limit, after=cursor)

    async def actors(self, actor_type: str, *, status: WorkflowState | None = None,
                     page_size: int = 100) -> AsyncIterator[ActorSummary]:
        """Every listed actor of a type (and status), page after page."""
        async for summary in every_summary(
                lambda cursor: self.list_actors(actor_type, status=status, limit=page_size, cursor=cursor)):
            yield summary

    # -- resume --------------------------------------------------------------------------------------
    async def resume(self, ref: ActorRef) -> OperationResult:
        """Resume one actor (see the module docstring); refusals raise."""
        definition = self.host.registry.get(ref.name)
        for _ in range(MAX_RACES):
            snapshot = await self._load(ref)
            state = snapshot.workflow.state
            if definition.workflow_fn is None:
                raise NotResumableError(f"actor type {ref.name} has no workflow: there is nothing to resume")
            if state in FINISHED:
                raise ActorFinishedError(f"the actor is {state.value}: its workflow has ended and cannot resume")
            if state is WorkflowState.PAUSED and snapshot.workflow.paused is not None:
                raise ActorPausedError(f"the actor is paused {pausing.describe_pause(snapshot.workflow.paused)}: "
                                       "unpause it to let it run (a resume never undoes a pause)")
            if state is WorkflowState.DIVERGED:
                return await self._resume_diverged(snapshot)
            if state is not WorkflowState.FAILED:
                await self.host.transport.wake(ref, reason=f"resume:{snapshot.version}")
                return _result(ref, "resume", "woken", state, f"{state.value}: woken now (a wake-up finds "
                                                                "nothing to do if nothing is due)")
            try:
                return await self._retry_failed(snapshot)
            except VersionConflict:
                continue
        raise WakeFailedError(f"resume of {ref} lost {MAX_RACES} version races in a row")

    async def _resume_diverged(self, snapshot: ActorSnapshot) -> OperationResult:
        report = await replay_snapshot(self.host.registry, snapshot)
        if report.outcome == "diverged":
            divergence = snapshot.workflow.divergence
            raise StillDivergedError(
                f"actor {snapshot.ref} still diverges from the code deployed here; deploy a fix, then resume:\n"
                f"{report.detail}", divergence=divergence.model_dump(mode="json") if divergence else {})
        await self.host.transport.wake(snapshot.ref, reason=f"resume:{snapshot.version}")
        waiting = sum(1 for m in snapshot.inbox if m.kind == "queue")
        return _result(snapshot.ref, "resume", "resumed", WorkflowState.DIVERGED,
                       f"its history replays against this code; woken ({waiting} waiting message(s) run now)")

    async def _retry_failed(self, snapshot: ActorSnapshot) -> OperationResult:
        ref = snapshot.ref
        compensated = remedies.compensation(snapshot.history, snapshot.workflow)
        if compensated is not None:  # (the rule the status's `remedies` and the dashboard follow too)
            raise NotResumableError(f"the actor {remedies.advice(snapshot.workflow, compensated)}")
        entries, record = reset_failure(snapshot.history, snapshot.workflow)
        draft = CommitDraft(upserts=[e.model_dump(mode="json", exclude_defaults=True) for e in entries],
                            deleted_prefixes=[], state=None, consumed_ids=[], responses={}, events=[],
                            workflow=record, committed_at=self.host.clock.now())
        version = await self.host.store.commit(ref, snapshot.version, draft)
        await self.host.transport.wake(ref, reason=f"resume:{version}")
        steps = [e.location for e in entries if e.kind is EntryKind.STEP]
        error = snapshot.workflow.error
        why = f" (it failed with {error.type}: {error.message})" if error else ""
        what = (f"step(s) {', '.join(steps)} run again with a fresh attempt count" if steps
                else "no step failed: the workflow runs again from its last recorded point")
        return _result(ref, "resume", "retrying", WorkflowState.FAILED, what + why)

    async def resume_page(self, actor_type: str, *, status: WorkflowState | None = None, limit: int = 25,
                          cursor: str | None = None) -> OperationPage:
        """Resume one page of the actors listed with this type (and status); refusals are reported per actor."""
        page = await self.list_actors(actor_type, status=status, limit=limit, cursor=cursor)
        results = [await self._resume_reporting(ActorRef(name=s.name, key=s.key), s.status) for s in page.actors]
        return OperationPage(results=results, cursor=page.cursor)

    async def _resume_reporting(self, ref: ActorRef, listed: WorkflowState) -> OperationResult:
        return await _reporting("resume", ref, listed, self.resume(ref))

    # -- pause and unpause (dormant.runtime.pausing) -------------------------------------------------------
    async def pause(self, ref: ActorRef, reason: str | None = None, *, by: str | None = None) -> OperationResult:
        """Hold the actor: no wake-up runs it until it is unpaused; messages are kept, timers keep their time."""
        return await pausing.pause(self.host, ref, reason=reason, by=by)

    async def unpause(self, ref: ActorRef, *, by: str | None = None) -> OperationResult:
        """Let a paused actor run again from where it was paused: woken now."""
        return await pausing.unpause(self.host, ref, by=by)

    async def pause_page(self, actor_type: str, *, status: WorkflowState | None = None, limit: int = 25,
                         cursor: str | None = None, reason: str | None = None, by: str | None = None
                         ) -> OperationPage:
        """Pause one page of the listing (without `status`, the finished actors in it are left out, unreported)."""
        page = await self.list_actors(actor_type, status=status, limit=limit, cursor=cursor)
        results = [await _reporting("pause", ref, s.status, self.pause(ref, reason, by=by))
                   for s in page.actors if status is not None or s.status not in FINISHED
                   for ref in (ActorRef(name=s.name, key=s.key),)]
        return OperationPage(results=results, cursor=page.cursor)

    async def unpause_page(self, actor_type: str, *, limit: int = 25, cursor: str | None = None,
                           by: str | None = None) -> OperationPage:
        """Unpause one page of the type's paused actors."""
        page = await self.list_actors(actor_type, status=WorkflowState.PAUSED, limit=limit, cursor=cursor)
        results = [await _reporting("unpause", ref, s.status, self.unpause(ref, by=by))
                   for s in page.actors for ref in (ActorRef(name=s.name, key=s.key),)]
        return OperationPage(results=results, cursor=page.cursor)

    # -- values kept outside the items (dormant.runtime.doctor) ---------------------------------------------
    async def check_values(self, ref: ActorRef, *, repair: bool = False) -> ValueCheck:
        """Its values kept in S3 checked against the bucket; with `repair`, recovered where their content is
        still there, and the actor marked failed if values of its live version are lost."""
        return await doctor.check_values(self.host, ref, repair=repair)

    # -- kept versions, fork and reset (dormant.runtime.versions, rewind) ------------------------------------
    async def versions(self, ref: ActorRef) -> list[VersionInfo]:
        """The versions of the actor a fork or reset can start from, oldest first."""
        self.host.registry.get(ref.name)
        found = await self.host.store.retained_versions(ref)
        if found is None:
            raise ActorNotFoundError("the actor does not exist")
        return found

    async def version(self, ref: ActorRef, version: int) -> KeptVersion:
        """The actor as it was at a kept version: state, workflow record, live history."""
        kept = await rewind.kept_version(self.host, ref, version)
        return KeptVersion(version=kept.version, state=kept.state, workflow=kept.workflow,
                           history=sorted(kept.history, key=lambda e: e.seq))

    async def fork(self, ref: ActorRef, version: int, new_key: Sequence[str], *, reason: str | None = None,
                   by: str | None = None, paused: bool = False) -> OperationResult:
        """A new actor from a kept version of this one (replayed against this code first); it runs on."""
        return await rewind.fork(self.host, ref, version, new_key, reason=reason, by=by, paused=paused)

    async def reset(self, ref: ActorRef, version: int, *, reason: str | None = None,
                    by: str | None = None) -> OperationResult:
        """The actor's history, state and record taken back to a kept version (replayed first), in place."""
        return await rewind.reset(self.host, ref, version, reason=reason, by=by)

    # -- inspect -------------------------------------------------------------------------------------------
    async def counts(self, actor_type: str, *, limit: int = 1000) -> ActorCounts:
        """How many actors of the type are listed in each status, each counted up to `limit`."""
        self.host.registry.get(actor_type)
        counts = {}
        for status in LISTED_STATUSES:
            found = await self.host.store.count_actors(actor_type, status, limit=limit)
            counts[status.value] = StatusCount(count=found.count, exact=found.exact)
        return ActorCounts(actor=actor_type, counts=counts)

    async def attention(self, actor_type: str, *, limit: int = 20) -> AttentionList:
        """The actors of the type that need an operator (failed first), at most `limit` per group."""
        return await attention_list(self.host.registry, self.host.store, actor_type, limit=limit)

    async def inbox(self, ref: ActorRef, *, limit: int = 100, preview: int = PREVIEW_CHARS) -> Inbox:
        """The messages waiting in the actor's inbox, in send order (queue messages and scheduled actions)."""
        self.host.registry.get(ref.name)
        snapshot = await self._load(ref)
        return Inbox(messages=[_pending(m, preview) for m in snapshot.inbox[:limit]], total=len(snapshot.inbox))

    # -- terminate and delete ------------------------------------------------------------------------
    async def terminate(self, ref: ActorRef, reason: str | None = None) -> OperationResult:
        """End the workflow as `terminated` (its waiting queue messages are discarded in the same commit)."""
        self.host.registry.get(ref.name)
        text = reason or "terminated by an operator"
        for _ in range(MAX_RACES):
            snapshot = await self._load(ref)
            state = snapshot.workflow.state
            if state in FINISHED:
                return _result(ref, "terminate", "unchanged", state, f"already {state.value}")
            record = snapshot.workflow.model_copy(update={
                "state": WorkflowState.TERMINATED, "waiting_for": [], "deadline": None, "retry_at": None,
                "error": ErrorInfo(type="Terminated", message=text), "paused": None})
            discarded = [m.id for m in snapshot.inbox if m.kind == "queue"]
            draft = CommitDraft(upserts=[], deleted_prefixes=[], state=None, consumed_ids=discarded, responses={},
                                events=[], workflow=record, committed_at=self.host.clock.now())
            try:
                await self.host.store.commit(ref, snapshot.version, draft)
            except VersionConflict:
                continue
            return _result(ref, "terminate", "terminated", state,
                           f"{state.value} -> terminated ({text}); {len(discarded)} waiting message(s) discarded")
        raise WakeFailedError(f"terminate of {ref} lost {MAX_RACES} version races in a row")

    async def delete(self, ref: ActorRef) -> OperationResult:
        """Remove every item of the actor (safe to re-run); a later request creates it afresh."""
        self.host.registry.get(ref.name)
        summary = await self.host.store.read_summary(ref)
        existed = await self.host.store.delete(ref, at=self.host.clock.now())  # wins over earlier requests
        status = summary.status if summary else None
        if not existed:
            return _result(ref, "delete", "not_found", status, f"actor {ref} does not exist (nothing is left of it)")
        return _result(ref, "delete", "deleted", status, f"every item of actor {ref} was removed")

    async def _load(self, ref: ActorRef) -> ActorSnapshot:
        return await load_existing(self.host, ref)


async def _reporting(operation: str, ref: ActorRef, listed: WorkflowState,
                     action: Awaitable[OperationResult]) -> OperationResult:
    """A bulk action's result for one actor: its refusal reported, not raised."""
    try:
        return await action
    except ActorNotFoundError as error:
        return _result(ref, operation, "not_found", listed, str(error))
    except (NotResumableError, ActorFinishedError, ActorPausedError) as error:
        return _result(ref, operation, "refused", listed, str(error))


def _pending(message: InboxMessage, preview: int) -> PendingMessage:
    payload: Any = message.args if message.kind == "action" else message.body
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    sender = f"{message.sender.kind}:{message.sender.id}" if message.sender is not None else None
    return PendingMessage(id=message.id, kind=message.kind, queue=message.queue, created_at=message.created_at,
                          not_before=message.not_before, sender=sender, bytes=len(text.encode()),
                          preview=text[:preview], truncated=len(text) > preview)
