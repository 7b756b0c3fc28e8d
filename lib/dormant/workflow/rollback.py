"""`ctx.rollback_checkpoint`, `ctx.removed`, and running compensation handlers."""

from __future__ import annotations

import inspect

from dormant.workflow.execution import Execution, error_info
from dormant.workflow.frame import Frame
from dormant.workflow.history import KIND_ALIASES, EntryKind, EntryStatus, validate_name
from dormant.workflow.host import StepRun
from dormant.workflow.signals import RollbackStop

ROLLBACK_RETRY_BASE = 1.0
ROLLBACK_RETRY_MAX = 300.0


async def run_checkpoint(frame: Frame, name: str) -> None:
    validate_name(name, "rollback checkpoint")
    ex, scope = frame.execution, frame.scope
    frame.check_cancelled()
    entry = scope.claim(EntryKind.ROLLBACK_CHECKPOINT, name)
    if entry is None:
        if ex.rolling_back:
            raise RollbackStop()
        entry = ex.new_entry(EntryKind.ROLLBACK_CHECKPOINT, scope.child(name), name, status=EntryStatus.COMPLETED)
        ex.touch(entry)
    else:
        ex.replayed += 1
    scope.checkpointed = True


async def run_removed(frame: Frame, name: str, kind: str) -> None:
    """Retire an entry deleted from the code: skip it in old histories, do nothing in new ones."""
    validate_name(name, "removed entry")
    original = KIND_ALIASES.get(kind)
    if original is None:
        raise ValueError(f"removed({name!r}, {kind!r}): kind must be one of {sorted(KIND_ALIASES)}")
    if frame.scope.skip_removed(name, (original, EntryKind.REMOVED)):
        frame.execution.replayed += 1


class CompensationFailed(Exception):
    """A rollback handler raised; the rollback resumes on a later wake-up."""


async def compensate(ex: Execution) -> None:
    """Run pending rollback handlers newest first; each one commits its own completion."""
    for entry, handler in reversed(ex.rollback_handlers):
        if entry.rollback_done:
            continue
        run = StepRun(location=entry.location, attempt=ex.record.rollback_attempts + 1)
        ex.step_started()
        try:
            result = handler(ex.host.step_context(run), ex.copy_output(entry))
            if inspect.isawaitable(result):
                await result
            ex.state.check(f'the rollback of step "{entry.location}"')
        except Exception as error:
            ex.step_ended(run)
            ex.state.revert()
            entry.put("rollback_error", error_info(error))
            ex.touch(entry)
            raise CompensationFailed(f'rollback of step "{entry.location}" failed: '
                                     f"{type(error).__name__}: {error}") from error
        except BaseException:
            ex.step_ended(run)
            raise
        ex.step_ended(run)
        entry.put("rollback_done", True)
        entry.put("rollback_error", None)
        ex.touch(entry)
        ex.keep_effects(run)
        await ex.checkpoint()
