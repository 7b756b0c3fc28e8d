"""Run a workflow function over an Execution: the one activation path shared by the live
runtime, the tests and offline replay."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from dormant.workflow.callbacks import close_ended
from dormant.workflow.context import WorkflowContext
from dormant.workflow.errors import HistoryDivergedError, WorkflowTimeoutError
from dormant.workflow.execution import Execution, Mode, error_info, to_json
from dormant.workflow.frame import Frame
from dormant.workflow.history import DivergenceInfo, WorkflowRecord, WorkflowState
from dormant.workflow.replay import Scope
from dormant.workflow.rollback import ROLLBACK_RETRY_BASE, ROLLBACK_RETRY_MAX, CompensationFailed, compensate
from dormant.workflow.signals import DeadlinePassed, RollbackStop, Suspend, WakeAborted, WakeRestart
from dormant.workflow.steps import backoff_delay

WorkflowFn = Callable[[WorkflowContext], Awaitable[Any]]
TERMINAL = (WorkflowState.COMPLETED, WorkflowState.FAILED, WorkflowState.TERMINATED)


async def run_workflow(fn: WorkflowFn, ex: Execution) -> WorkflowRecord:
    """Replay and advance the workflow until it must wait, ends, fails or diverges; commit the outcome.

    WakeAborted and WakeRestart propagate to the caller (the runtime retries from storage).
    """
    loaded = ex.record
    if loaded.state in TERMINAL or loaded.state is WorkflowState.PAUSED:  # a paused actor runs nothing
        return loaded
    if ex.rolling_back and loaded.retry_at is not None and loaded.retry_at > ex.now():
        return loaded  # an early wake-up while a failed compensation waits for its retry
    ex.root_task = asyncio.current_task()
    root = Scope("", ex.index.children(""), checkpointed=False)
    ctx = Frame(ex, root, WorkflowContext).context()
    cleared: dict[str, Any] = {"divergence": None, "waiting_for": [], "deadline": None, "retry_at": None, "limits": []}
    base = _Base(loaded, cleared)
    try:
        output = await fn(ctx)
        root.finish(fn)
        output = to_json(output, "the workflow's result")  # unstorable: the workflow fails, not the wake-up
    except Suspend as suspension:
        if ex.rolling_back:
            return await _finish_rollback(ex, base.record)
        if ex.deadline is not None and ex.now() >= ex.deadline:
            return await _fail(ex, base.record, _timed_out(ex.deadline))
        # A pure step retry shows as retry_at; anything mixed (a join with a retrying branch and a
        # waiting one) as the earliest deadline.
        retrying = suspension.reason == "retry"
        deadline = None if retrying else suspension.deadline
        if ex.deadline is not None and (suspension.deadline is None or ex.deadline < suspension.deadline):
            deadline = ex.deadline  # the workflow's deadline comes first: its timer wakes the actor to fail it
        record = base.changed({
            "state": WorkflowState.SLEEPING, "waiting_for": sorted(suspension.names),
            "deadline": deadline,
            "retry_at": suspension.deadline if retrying else None, "limits": sorted(suspension.limits)})
    except DeadlinePassed as passed:
        return await _fail(ex, base.record, _timed_out(passed.deadline))
    except RollbackStop:
        return await _finish_rollback(ex, base.record)
    except HistoryDivergedError as diverged:
        record = base.changed({"state": WorkflowState.DIVERGED, "divergence": DivergenceInfo(**diverged.to_dict())})
    except (WakeAborted, WakeRestart):
        raise
    except Exception as error:
        if ex.rolling_back:
            return await _finish_rollback(ex, base.record)
        return await _fail(ex, base.record, error)
    else:
        if ex.rolling_back:
            return await _finish_rollback(ex, base.record)
        record = base.changed({"state": WorkflowState.COMPLETED, "output": output, "error": None})
    close_ended(ex, record)
    await ex.finish(record)
    return record


class _Base:
    """The loaded record with what the last run recorded cleared (`cleared`): each outcome's record is one copy of the
    loaded one with both changes (a suspension, the most common, makes no intermediate copy)."""

    __slots__ = ("_cleared", "_loaded", "_record")

    def __init__(self, loaded: WorkflowRecord, cleared: dict[str, Any]) -> None:
        self._loaded, self._cleared = loaded, cleared
        self._record: WorkflowRecord | None = None

    @property
    def record(self) -> WorkflowRecord:
        """The loaded record, cleared (made once, when an outcome needs it as such)."""
        if self._record is None:
            self._record = self._loaded.model_copy(update=self._cleared)
        return self._record

    def changed(self, update: dict[str, Any]) -> WorkflowRecord:
        return self._loaded.model_copy(update={**self._cleared, **update})


def _timed_out(deadline: float) -> WorkflowTimeoutError:
    when = datetime.fromtimestamp(deadline, UTC).isoformat(timespec="seconds")
    return WorkflowTimeoutError(f"the workflow ran past its deadline ({when}, its actor's workflow_timeout after "
                                "it started) and was stopped")


async def _fail(ex: Execution, base: WorkflowRecord, error: BaseException) -> WorkflowRecord:
    """The run failed with `error`: roll back what has handlers, else record it failed."""
    failed = base.model_copy(update={"error": error_info(error)})
    if any(not entry.rollback_done for entry, _ in ex.rollback_handlers):
        ex.mode = Mode.ROLLBACK
        ex.record = failed.model_copy(update={"state": WorkflowState.ROLLING_BACK})
        return await _finish_rollback(ex, ex.record)
    record = failed.model_copy(update={"state": WorkflowState.FAILED})
    close_ended(ex, record)
    await ex.finish(record)
    return record


async def _finish_rollback(ex: Execution, base: WorkflowRecord) -> WorkflowRecord:
    """Compensate newest-first; a failing handler leaves the actor rolling back, to retry later."""
    ex.record = base.model_copy(update={"state": WorkflowState.ROLLING_BACK})
    try:
        await compensate(ex)
    except CompensationFailed as failure:
        attempts = base.rollback_attempts + 1
        record = ex.record.model_copy(update={
            "rollback_attempts": attempts,
            "retry_at": ex.now() + backoff_delay(attempts, ROLLBACK_RETRY_BASE, ROLLBACK_RETRY_MAX),
            "deadline": None, "divergence": None,
            "error": ex.record.error or error_info(failure)})
        record.waiting_for = []
        await ex.finish(record)
        # Keep the failure visible on status (the original error stays the workflow's error).
        return record
    record = ex.record.model_copy(update={"state": WorkflowState.FAILED, "retry_at": None})
    await ex.finish(record)
    return record
