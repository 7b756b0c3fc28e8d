"""What `ctx.try_step` and `ctx.try_` return: a result, or the failure they caught, as values (RivetKit's tryStep and
try). Their fields are JSON (or dataclasses of JSON), so a result can be returned from the workflow as it is.

No I/O; the runs themselves are in tries.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

StepFailureKind = Literal["critical", "timeout", "exhausted"]
TrySource = Literal["step", "join", "race", "map", "block"]
STEP_FAILURE_KINDS: tuple[StepFailureKind, ...] = ("critical", "timeout", "exhausted")
TRY_SOURCES: tuple[TrySource, ...] = ("step", "join", "race", "map", "block")


@dataclass(frozen=True, slots=True)
class ErrorDetail:
    """A caught error as recorded: its exception type by `name`, and its `message`."""

    name: str
    message: str


@dataclass(frozen=True, slots=True)
class StepFailure:
    """How a step failed: `kind` is "critical" (it raised NonRetryableError), "timeout" (its last attempt timed out)
    or "exhausted" (every attempt failed); `attempts` counts them all; `error` is the last attempt's."""

    kind: StepFailureKind
    step_name: str
    attempts: int
    error: ErrorDetail


@dataclass(frozen=True, slots=True)
class StepResult:
    """What `ctx.try_step` returns: `ok` and the step's `value`, or not `ok` and its `failure`."""

    ok: bool
    value: Any = None
    failure: StepFailure | None = None


@dataclass(frozen=True, slots=True)
class TryFailure:
    """What failed in a `ctx.try_` block: `source` is "step", "join", "race" or "map" (the failed entry, by `name`)
    or "block" (an exception of the block's own code; `name` is the block's); `step` is set for a step's."""

    source: TrySource
    name: str
    error: ErrorDetail
    step: StepFailure | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> TryFailure:
        step = data.get("step")
        return TryFailure(source=data["source"], name=data["name"], error=ErrorDetail(**data["error"]),
                          step=None if step is None else StepFailure(
                              kind=step["kind"], step_name=step["step_name"], attempts=step["attempts"],
                              error=ErrorDetail(**step["error"])))


@dataclass(frozen=True, slots=True)
class TryResult:
    """What `ctx.try_` returns: `ok` and the block's `value`, or not `ok` and its `failure`."""

    ok: bool
    value: Any = None
    failure: TryFailure | None = None
