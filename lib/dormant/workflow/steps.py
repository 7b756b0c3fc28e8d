"""`ctx.step`: run a callable once, record its result, retry failures by suspending."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from dormant.workflow import throttle
from dormant.workflow.entries import Entry
from dormant.workflow.errors import (
    NonRetryableError,
    RollbackCheckpointError,
    StepExhaustedError,
    StepTimeoutError,
    WorkflowDefinitionError,
)
from dormant.workflow.execution import Execution, error_info, run_to_the_end, settle_eagerly, to_json
from dormant.workflow.frame import Frame
from dormant.workflow.history import EntryKind, EntryStatus, ErrorInfo, validate_name
from dormant.workflow.host import Granted, StepRun
from dormant.workflow.signals import BranchCancelled, RollbackStop, Suspend

_PLAIN = (type(None), bool, int, float, str, list, dict)  # results that cannot be awaitable: no ABC check
_SCALARS = frozenset((bool, int, float, str))  # results handed back as they are (Execution.copy_output_value)
DEFAULT_MAX_RETRIES = 3
DEFAULT_BACKOFF_BASE = 0.1
DEFAULT_BACKOFF_MAX = 30.0


def seconds(value: float | timedelta | None) -> float | None:
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def backoff_delay(attempt: int, base: float, maximum: float) -> float:
    """Delay before the retry that follows failed attempt number `attempt` (1-based): `base * 2**attempt`,
    capped at `maximum`, as RivetKit computes it (the first retry waits 2 x base)."""
    return float(min(maximum, base * (2 ** attempt)))


async def run_step(frame: Frame, name: str, fn: Callable[[Any], Any], *,
                   timeout: float | timedelta | None, max_retries: int, retry_backoff_base: float | timedelta,
                   retry_backoff_max: float | timedelta, rollback: Callable[[Any, Any], Any] | None,
                   limit: str | None = None, limit_key: str | None = None, priority: int | None = None,
                   ephemeral: bool = False) -> Any:
    """`ctx.step`. `ephemeral`: its success asks for no commit of its own; the next commit of the run (a durable
    step's, a suspension's, the run's end) stores it, and a crash before that runs it again."""
    validate_name(name, "step")
    if max_retries < 0:
        raise ValueError(f'step "{name}": max_retries must be >= 0, got {max_retries}')
    ex, scope = frame.execution, frame.scope
    if limit is not None:
        ex.host.check_limit(name, limit)  # an undeclared limit is a definition error, on replay too
    elif limit_key is not None or priority is not None:
        raise WorkflowDefinitionError(f'step "{name}": limit_key= and priority= need limit= (the limit they apply to)')
    frame.check_cancelled()
    if rollback is not None and not scope.checkpointed:
        raise RollbackCheckpointError(
            f'step "{name}" has a rollback handler but no ctx.rollback_checkpoint(...) ran before it '
            f'in {scope.location or "the workflow root"}')
    entry = scope.claim(EntryKind.STEP, name)
    if entry is not None:
        ex.replayed += 1
        if entry.status is EntryStatus.COMPLETED:
            if rollback is not None:
                ex.register_rollback(entry, rollback)
            return ex.copy_output(entry)
        if entry.status is EntryStatus.FAILED:
            err = entry.error
            raise StepExhaustedError(name, entry.attempts, err.type if err else "Error", err.message if err else "",
                                     recorded_failure_kind(entry, max_retries))
        if ex.rolling_back:
            raise RollbackStop()
        if entry.retry_at is not None and entry.retry_at > ex.now():
            raise Suspend(deadline=entry.retry_at, reason="retry")
    else:
        if ex.rolling_back:
            raise RollbackStop()
        entry = ex.new_entry(EntryKind.STEP, scope.child(name), name)

    # Results of earlier steps are committed before this one's side effects start (and at the latest when
    # the run suspends or ends), so a step costs one write, folded with what follows it.
    await ex.flush()
    frame.check_cancelled()
    if ex.deadline is not None:
        ex.check_deadline()  # a retry (or a new step) past the workflow's deadline: the run fails instead
    timeout_s = seconds(timeout)
    if limit is None:
        return await _attempt(frame, entry, name, fn, timeout_s, max_retries, retry_backoff_base, retry_backoff_max,
                              rollback, ephemeral)
    granted = throttle.acquire(frame, entry, limit, timeout_s, limit_key, priority)  # at once when the slot is free
    if not isinstance(granted, Granted):
        granted = await granted  # Suspend when refused
    try:
        return await _attempt(frame, entry, name, fn, timeout_s, max_retries, retry_backoff_base, retry_backoff_max,
                              rollback, ephemeral, granted)
    finally:
        # Whatever ended the attempt (a result, a failure, its timeout, a race that cancelled it), the slot goes
        # back now, even while this task is being cancelled.
        # Given back at once by a store that answers without waiting (memory: no coroutine, task or turn), else
        # started at once in this task.
        releasing = ex.host.release_limit(granted)
        if releasing is not None:
            finished, running = settle_eagerly(releasing)
            cancelled, error = (False, None) if finished else await run_to_the_end(running)
            if error is not None and not isinstance(error, asyncio.CancelledError):
                raise error
            if cancelled:
                raise asyncio.CancelledError()


async def _attempt(frame: Frame, entry: Entry, name: str, fn: Callable[[Any], Any], timeout: float | None,
                   max_retries: int, retry_backoff_base: float | timedelta, retry_backoff_max: float | timedelta,
                   rollback: Callable[[Any, Any], Any] | None, ephemeral: bool,
                   granted: Granted | None = None) -> Any:
    """Run one attempt of the step's body and record what it did. `granted`: its limit's slot, told before an async
    body is awaited (`Granted.waits`)."""
    ex, scope = frame.execution, frame.scope
    attempt = entry.attempts + 1
    run = StepRun(location=entry.location, attempt=attempt)
    scope.enter(name)
    ex.step_started()
    entry.started_at, entry.ended_at = ex.now(), None  # this attempt's run (a duration without earlier failures)
    if entry.throttled_since is not None:  # it runs: it waits for no limit (also when a deploy took it away)
        entry.put("throttled_since", None)
        ex.touch(entry)
    try:
        result = fn(ex.host.step_context(run))
        if not isinstance(result, _PLAIN) and inspect.isawaitable(result):
            if granted is not None:
                granted.waits()
            if timeout is None:
                result = await result
            else:
                async with asyncio.timeout(timeout):
                    result = await result
        # (None, most steps' result, is JSON as it is: no text naming it made)
        output = None if result is None else to_json(result, f'the result of step "{name}"')
        # A state change that would not load back, or a result or state too big to store, fails the attempt
        # like any error (retried per the policy, then StepExhaustedError): never the wake-up.
        state = ex.state.check(f'step "{name}"') if run.touched_state else None
        ended = ex.now()
        ex.check_storable(entry, output, state, run.events, attempt, ended)
    except (asyncio.CancelledError, BranchCancelled):
        ex.step_ended(run)
        scope.leave()
        cancelled_by = frame.cancelled_by()
        if cancelled_by is not None:  # its race was won by another branch, or its map was decided
            _record_cancelled(ex, entry, attempt, cancelled_by.reason)
        _discard_attempt(ex, run)
        raise
    except TimeoutError:
        ex.step_ended(run)
        scope.leave()
        failure: BaseException = StepTimeoutError(f'step "{name}" timed out after {timeout} s and was cancelled')
        return _record_failure(ex, entry, run, failure, attempt, max_retries, retry_backoff_base, retry_backoff_max)
    except Exception as error:
        ex.step_ended(run)
        scope.leave()
        return _record_failure(ex, entry, run, error, attempt, max_retries, retry_backoff_base, retry_backoff_max)
    except BaseException:
        ex.step_ended(run)
        scope.leave()
        raise
    ex.step_ended(run)
    scope.leave()
    if state is not None:
        ex.state_json = state  # (what the check dumped: the commit's state, unless a step starts meanwhile)
    entry.status = EntryStatus.COMPLETED
    entry.output = output
    entry.ended_at = ended
    entry.attempts = attempt
    entry.error = None
    # Fields most steps never set: cleared only where set (an assignment would give the entry an instance dict)
    if entry.failure_kind is not None:
        entry.put("failure_kind", None)  # (an operator's resume retried a failed step)
    if entry.retry_at is not None:
        entry.put("retry_at", None)
    ex.touch(entry, ended)  # (as check_storable previewed it)
    if run.events or run.search:  # (most steps broadcast nothing and set no search attribute)
        ex.keep_effects(run)
    if rollback is not None:
        ex.register_rollback(entry, rollback)
    if not ephemeral:
        ex.step_succeeded()
        ex.want_commit()
    elif run.touched_state and not ex.in_flight:
        # Nothing else is half-way through the state: what this step left is kept, and a later failed attempt
        # reverts to it, not to the last commit (which would undo this step without undoing its record).
        ex.state.kept = state
    elif run.touched_state:
        ex.step_succeeded()  # beside a running step: a failure there cannot revert without undoing this one
    return output if output is None or type(output) in _SCALARS else ex.copy_output_value(output)


def recorded_failure_kind(entry: Entry, max_retries: int) -> str:
    """How a failed step failed: as recorded, or (a step recorded before kinds were) as its record tells."""
    if entry.failure_kind is not None:
        return entry.failure_kind
    if entry.error is not None and entry.error.type == StepTimeoutError.__name__:
        return "timeout"
    return "critical" if entry.attempts <= max_retries else "exhausted"


def _record_cancelled(ex: Execution, entry: Entry, attempt: int, reason: str) -> None:
    """A losing race branch's step (or a decided map's item's) was cancelled mid-attempt, as a timeout cancels
    it: recorded as such (the race records its winner, the map its items' outcomes, so replay never runs this
    branch again)."""
    entry.status = EntryStatus.CANCELLED
    entry.attempts = attempt
    entry.ended_at = ex.now()
    if entry.retry_at is not None:  # (cleared only where set, as a completion clears it)
        entry.put("retry_at", None)
    entry.error = ErrorInfo(type="StepCancelled", message=f'step "{entry.name}" was cancelled: {reason}')
    ex.touch(entry)


def _discard_attempt(ex: Execution, run: StepRun) -> None:
    """An attempt was cut short: undo its state changes, or redo the wake-up if that is not safe."""
    if not run.touched_state:
        return  # it never saw the state, so it cannot have changed it
    if ex.clean_for_revert():
        ex.state.revert()
    elif not ex.serial:
        ex.restart_serially()  # siblings still running must not commit the mixed-up state


def _record_failure(ex: Execution, entry: Entry, run: StepRun, error: BaseException, attempt: int,
                    max_retries: int, base: float | timedelta, maximum: float | timedelta) -> Any:
    _discard_attempt(ex, run)
    entry.attempts = attempt
    entry.ended_at = ex.now()
    entry.error = error_info(error)
    if isinstance(error, NonRetryableError) or attempt > max_retries:
        entry.status = EntryStatus.FAILED
        if entry.retry_at is not None:
            entry.put("retry_at", None)
        failure_kind = ("critical" if isinstance(error, NonRetryableError)
                        else "timeout" if isinstance(error, StepTimeoutError) else "exhausted")
        entry.put("failure_kind", failure_kind)
        ex.touch(entry)
        raise StepExhaustedError(entry.name, attempt, type(error).__name__, str(error), failure_kind) from error
    delay = backoff_delay(attempt, seconds(base) or 0.0, seconds(maximum) or 0.0)
    entry.put("retry_at", ex.now() + delay)
    ex.touch(entry)
    raise Suspend(deadline=entry.retry_at, reason="retry")
