"""`ctx.loop`: durable loops whose finished iterations are compacted away."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from dormant.workflow.errors import WorkflowDefinitionError
from dormant.workflow.execution import Execution, to_json
from dormant.workflow.frame import Frame
from dormant.workflow.history import EntryKind, EntryStatus, iteration_location, validate_name
from dormant.workflow.signals import RollbackStop

T = TypeVar("T")
DEFAULT_HISTORY_KEEP = 2


@dataclass(frozen=True)
class LoopBreak(Generic[T]):
    value: T


@dataclass(frozen=True)
class LoopContinue(Generic[T]):
    state: T


class Loop:
    """Return values of a loop body: `Loop.continue_(state)` or `Loop.break_(value)`."""

    @staticmethod
    def break_(value: Any = None) -> LoopBreak[Any]:
        return LoopBreak(value)

    @staticmethod
    def continue_(state: Any = None) -> LoopContinue[Any]:
        return LoopContinue(state)


NO_STATE: Any = object()
"""`state`'s default: a loop without state (its body takes the context only)."""


async def run_loop(frame: Frame, name: str, body: Callable[..., Awaitable[Any]], *,
                   state: Any = NO_STATE, history_keep: int = DEFAULT_HISTORY_KEEP) -> Any:
    validate_name(name, "loop")
    if history_keep < 0:
        raise ValueError(f'loop "{name}": history_keep must be >= 0, got {history_keep}')
    ex, scope = frame.execution, frame.scope
    frame.check_cancelled()
    stateful = state is not NO_STATE
    entry = scope.claim(EntryKind.LOOP, name)
    if entry is None:
        if ex.rolling_back:
            raise RollbackStop()
        entry = ex.new_entry(EntryKind.LOOP, scope.child(name), name, loop_state=to_json(state) if stateful else None)
        ex.touch(entry)
    else:
        ex.replayed += 1
        if entry.status is EntryStatus.COMPLETED:
            return ex.copy_output(entry)
    while True:
        iteration = entry.iteration
        location = iteration_location(entry.location, iteration)
        child = frame.child(location)
        iteration_ctx = child.context()
        result = await (body(iteration_ctx, ex.copy_output_value(entry.loop_state)) if stateful
                        else body(iteration_ctx))
        child.scope.finish(body)
        ex.drop_rollback_handlers(location)
        if ex.rolling_back:
            raise RollbackStop()  # rollback replays only the current iteration; no progress is saved
        if isinstance(result, LoopBreak):
            entry.status = EntryStatus.COMPLETED
            entry.output = to_json(result.value)
            ex.touch(entry)
            _compact(ex, entry.location, iteration + 1, history_keep)
            return ex.copy_output(entry)
        if isinstance(result, LoopContinue):
            next_state = to_json(result.state)
        elif result is None:
            if stateful:
                raise WorkflowDefinitionError(
                    f'loop "{name}" is stateful but its body returned None; return Loop.continue_(state) '
                    "or Loop.break_(value)")
            next_state = None
        else:
            raise WorkflowDefinitionError(
                f'loop "{name}" body returned {type(result).__name__}; return None, Loop.continue_(state) '
                "or Loop.break_(value)")
        entry.put("iteration", iteration + 1)
        if next_state is not None or entry.loop_state is not None:  # (a stateless loop has none to write)
            entry.put("loop_state", next_state)
        ex.touch(entry)
        _compact(ex, entry.location, iteration + 1, history_keep)


def _compact(ex: Execution, loop_location: str, next_iteration: int, keep: int) -> None:
    """Drop the finished iteration that just fell out of the inspection window."""
    doomed = next_iteration - 1 - keep
    if doomed >= 0:
        ex.delete_prefix(iteration_location(loop_location, doomed))
