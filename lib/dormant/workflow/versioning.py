"""`ctx.get_version`: let a running workflow's code change without diverging its older actors (RivetKit's
getVersion).

A fresh check resolves to `latest`, unless its scope holds recorded entries this run has not reached yet: that
scope ran under older code, which had no check here, so it resolves to 1. Either way the resolution is recorded
(a `version_check` entry whose output is the version) and every replay returns it. The check is matched by name
wherever it was recorded in its scope (dormant.workflow.replay.Scope.claim_version), since code inserts it before
entries that were recorded earlier.
"""

from __future__ import annotations

from dormant.workflow.errors import WorkflowDefinitionError
from dormant.workflow.frame import Frame
from dormant.workflow.history import EntryKind, EntryStatus, validate_name
from dormant.workflow.signals import RollbackStop

OLDEST = 1  # what code that predates a check is said to be


async def run_get_version(frame: Frame, name: str, latest: int) -> int:
    validate_name(name, "version check")
    if isinstance(latest, bool) or not isinstance(latest, int) or latest < OLDEST:
        raise WorkflowDefinitionError(f'get_version("{name}", {latest!r}): latest must be an integer >= {OLDEST} '
                                      "(the version of the code at this point; raise it with each change)")
    ex, scope = frame.execution, frame.scope
    frame.check_cancelled()
    older = scope.unvisited  # read before the claim: the check's own entry is not "older code"
    entry = scope.claim_version(name)
    if entry is not None:
        ex.replayed += 1
        return int(entry.output)
    if ex.rolling_back:
        raise RollbackStop()
    if scope.sealed:
        # A join/race branch that completed in history under code without this check: it stays as it ran (a
        # completed branch records nothing more).
        return OLDEST
    resolved = OLDEST if older else latest
    entry = ex.new_entry(EntryKind.VERSION_CHECK, scope.child(name), name, status=EntryStatus.COMPLETED,
                         output=resolved)
    ex.touch(entry)
    return resolved
