"""`dormant doctor`: an actor's values kept outside its items checked, and repaired where possible
(EventStore.check_values does the store's part; docs/operations.md, "Lost values").

When a repair finds values of the live version lost for good, the store has put markers in their place so that the
actor loads again; here it is marked failed, naming what was lost and the kept versions a reset can go back to.
Resume would replay the workflow with the markers: the error says so."""

from __future__ import annotations

from dormant.errors import ActorNotFoundError, StoredValueLostError, VersionConflict, WakeFailedError
from dormant.models import ValueCheck
from dormant.ports import ActorRef
from dormant.runtime.failure_record import failure_mark
from dormant.runtime.outcomes import MAX_RACES, OperatorHost
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import WorkflowState

SHOWN = 5  # lost places an error names


async def check_values(host: OperatorHost, ref: ActorRef, *, repair: bool = False) -> ValueCheck:
    """The check (and with `repair`, the repair) of one actor; ActorNotFoundError if there is none."""
    host.registry.get(ref.name)
    report = await host.store.check_values(ref, repair=repair)
    if report is None:
        raise ActorNotFoundError("the actor does not exist")
    lost_here = sorted({p.where for p in report.problems if p.outcome == "lost" and p.where.startswith("version ")})
    if not repair or not lost_here:
        return report
    newest = max(int(where.split(":")[0].removeprefix("version ")) for where in lost_here)
    live = [where for where in lost_here if where.startswith(f"version {newest}:")]
    if await _mark_failed(host, ref, live, report.intact_versions):
        report.marked_failed = True
        report.message += "; the actor is marked failed (reset it to an intact version, or delete it)"
    return report


async def _mark_failed(host: OperatorHost, ref: ActorRef, lost: list[str], intact: list[int]) -> bool:
    shown = "; ".join(lost[:SHOWN]) + (f" and {len(lost) - SHOWN} more" if len(lost) > SHOWN else "")
    back = (f"reset it to version {intact[-1]} (kept with all its values) or delete it"
            if intact else "no kept version has all its values: fork or delete it")
    error = StoredValueLostError(f"stored values of this actor were lost ({shown}): `dormant doctor --repair` put "
                                 f"markers in their place; {back} (a resume would run on with the markers)")
    for _ in range(MAX_RACES):
        snapshot = await host.store.load(ref)
        if snapshot is None:
            return False
        if snapshot.workflow.state is WorkflowState.FAILED and snapshot.workflow.error is not None and \
                snapshot.workflow.error.type == StoredValueLostError.__name__:
            return True  # marked by an earlier repair
        record = failure_mark(snapshot.workflow, error)
        try:
            await host.store.commit(ref, snapshot.version, CommitDraft(
                upserts=[], deleted_prefixes=[], state=None, consumed_ids=[], responses={}, events=[],
                workflow=record, committed_at=host.clock.now()))
        except VersionConflict:
            continue
        return True
    raise WakeFailedError(f"marking {ref} failed lost {MAX_RACES} version races in a row")
