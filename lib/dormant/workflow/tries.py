"""`ctx.try_step` and `ctx.try_`: failures as values (RivetKit's tryStep and try).

`try_step` is a step (same entry, same options) whose final failure, if its kind is caught, is returned instead of
raised; a replay of the failed step returns the recorded failure without running it. `try_` runs a block (an async
function of a context, like a join branch) in its own scope under a `try` entry, which records the block's value or
the failure it caught; a replay of a finished block replays the block (sealed: it may start nothing new, and it
registers the rollback handlers of its steps) and returns what was recorded. Suspensions, cancellation, divergence
and the workflow's deadline are control flow, never failures: they always propagate, as do definition errors (API
misuse) and failures whose kind or source is not caught.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from dormant.workflow.entries import Entry
from dormant.workflow.errors import (
    HistoryDivergedError,
    JoinError,
    MapError,
    RaceError,
    StepExhaustedError,
    WorkflowDefinitionError,
)
from dormant.workflow.execution import Execution, to_json
from dormant.workflow.frame import Frame
from dormant.workflow.history import EntryKind, EntryStatus, ErrorInfo, validate_name
from dormant.workflow.signals import RollbackStop
from dormant.workflow.try_result import (
    STEP_FAILURE_KINDS,
    TRY_SOURCES,
    ErrorDetail,
    StepFailure,
    StepResult,
    TryFailure,
    TryResult,
)

Block = Callable[[Any], Awaitable[Any]]  # async def (ctx) -> value, as a join branch
S = TypeVar("S", bound=str)


def caught(what: str, catch: Iterable[str] | str, allowed: tuple[S, ...]) -> frozenset[str]:
    """`catch` checked against what `what` can catch (a single name is taken as one)."""
    names = frozenset((catch,) if isinstance(catch, str) else catch)
    unknown = sorted(names - set(allowed))
    if unknown:
        raise WorkflowDefinitionError(f"{what}: catch {unknown} is not among {list(allowed)}")
    return names


def step_failure(error: StepExhaustedError) -> StepFailure:
    kind = error.kind if error.kind in STEP_FAILURE_KINDS else "exhausted"
    return StepFailure(kind=kind, step_name=error.step, attempts=error.attempts,
                       error=ErrorDetail(error.error_type, error.error_message))


async def run_try_step(frame: Frame, name: str, step: Callable[[], Awaitable[Any]],
                       catch: Iterable[str] | str) -> StepResult:
    """`step()` runs the step (dormant.workflow.steps.run_step with its options)."""
    kinds = caught(f'try_step("{name}")', catch, STEP_FAILURE_KINDS)
    try:
        value = await step()
    except StepExhaustedError as error:
        failure = step_failure(error)
        if failure.kind not in kinds:
            raise
        return StepResult(ok=False, failure=failure)
    return StepResult(ok=True, value=value)


def _failure(name: str, error: Exception) -> TryFailure:
    detail = ErrorDetail(type(error).__name__, str(error))
    if isinstance(error, StepExhaustedError):
        return TryFailure(source="step", name=error.step, error=ErrorDetail(error.error_type, error.error_message),
                          step=step_failure(error))
    if isinstance(error, JoinError):
        return TryFailure(source="join", name=error.name, error=detail)
    if isinstance(error, RaceError):
        return TryFailure(source="race", name=error.name, error=detail)
    if isinstance(error, MapError):
        return TryFailure(source="map", name=error.name, error=detail)
    return TryFailure(source="block", name=name, error=detail)


async def run_try(frame: Frame, name: str, body: Block, catch: Iterable[str] | str) -> TryResult:
    validate_name(name, "try block")
    sources = caught(f'try_("{name}")', catch, TRY_SOURCES)
    ex, scope = frame.execution, frame.scope
    frame.check_cancelled()
    entry = scope.claim(EntryKind.TRY, name)
    if entry is None:
        if ex.rolling_back:
            raise RollbackStop()
        entry = ex.new_entry(EntryKind.TRY, scope.child(name), name)
        ex.touch(entry)  # recorded before what the block records under it
    else:
        ex.replayed += 1
    finished = entry.status in (EntryStatus.COMPLETED, EntryStatus.FAILED)
    child = frame.child(entry.location, sealed=finished)
    try:
        value = await body(child.context())
        child.scope.finish(body)
        value = to_json(value, f'the result of try_("{name}")')
    except (HistoryDivergedError, WorkflowDefinitionError):
        raise  # the code no longer matches its history, or misuses the API: never a failure to hand back
    except Exception as error:
        if finished:
            return _recorded(ex, entry)  # the replay of a finished block ends as it ended
        failure = _failure(name, error)
        if failure.source not in sources:
            raise
        if ex.rolling_back:
            raise RollbackStop() from None  # a rollback replay records nothing
        entry.status = EntryStatus.FAILED
        entry.output = failure.to_json()
        entry.error = ErrorInfo(type=failure.error.name, message=failure.error.message)
        ex.touch(entry)
        return TryResult(ok=False, failure=failure)
    if finished:
        return _recorded(ex, entry)
    if ex.rolling_back:
        raise RollbackStop()
    entry.status = EntryStatus.COMPLETED
    entry.output = value
    ex.touch(entry)
    return TryResult(ok=True, value=ex.copy_output_value(value))


def _recorded(ex: Execution, entry: Entry) -> TryResult:
    if entry.status is EntryStatus.FAILED:
        return TryResult(ok=False, failure=TryFailure.from_json(entry.output))
    return TryResult(ok=True, value=ex.copy_output(entry))
