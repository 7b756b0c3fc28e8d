"""Control-flow signals that unwind user code.

They derive from BaseException so that a user's `except Exception:` cannot swallow them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dormant.workflow.errors import HistoryDivergedError


class Suspend(BaseException):
    """The workflow must wait: until `deadline` (epoch seconds) and/or a message on `names`; `limits` names the
    flow-control limits whose slots it waits for (a release wakes it before `deadline`)."""

    def __init__(self, *, deadline: float | None = None, names: Iterable[str] = (), reason: str = "wait",
                 limits: Iterable[str] = ()) -> None:
        self.deadline = deadline
        self.names = frozenset(names)
        self.reason = reason
        self.limits = frozenset(limits)
        super().__init__(reason)

    @staticmethod
    def merge(suspensions: Iterable[Suspend]) -> Suspend:
        """Earliest deadline, union of awaited queue names (what either branch waits for wakes us)."""
        deadlines = []
        names: set[str] = set()
        limits: set[str] = set()
        reasons = []
        for s in suspensions:
            if s.deadline is not None:
                deadlines.append(s.deadline)
            names |= s.names
            limits |= s.limits
            reasons.append(s.reason)
        return Suspend(deadline=min(deadlines) if deadlines else None, names=names,
                       reason="+".join(sorted(set(reasons))), limits=limits)


class WakeAborted(BaseException):
    """Storage failed under the engine (or the version race was lost): abandon the wake-up."""

    def __init__(self, cause: BaseException) -> None:
        self.cause = cause
        super().__init__(f"wake-up aborted: {type(cause).__name__}: {cause}")


class WakeRestart(BaseException):
    """Run the wake-up again from storage, with parallel branches run one at a time.

    Raised when a step fails or is cancelled while another step is in flight: its state
    changes cannot be separated from the other step's, so nothing uncommitted is kept.
    """


class RollbackStop(BaseException):
    """Rollback replay reached the first entry that never completed: stop collecting handlers."""


class DeadlinePassed(BaseException):
    """The workflow's deadline (`actor(..., workflow_timeout=...)`) passed before new work: the run fails with
    WorkflowTimeoutError (a BaseException here, so that neither user code nor ctx.try_ can swallow it)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        super().__init__(f"the workflow's deadline ({deadline}) passed")


class BranchCancelled(BaseException):
    """This race branch lost: it must not start anything new."""


# When several branches raise control signals at once, the most severe wins.
CONTROL_PRIORITY: tuple[type[BaseException], ...] = (WakeAborted, WakeRestart, RollbackStop)


def raise_control(outcomes: Mapping[str, BaseException | None]) -> None:
    """Of what parallel branches (or map items) ended with, raise what stops the caller itself: a control signal
    (the most severe), a divergence, or another BaseException; a branch's own outcome (a result, an Exception, a
    suspension, its cancellation) is left to the caller."""
    for kind in CONTROL_PRIORITY:
        for outcome in outcomes.values():
            if isinstance(outcome, kind):
                raise outcome
    for outcome in outcomes.values():
        if isinstance(outcome, HistoryDivergedError):
            raise outcome
    for outcome in outcomes.values():
        # Any other BaseException (KeyboardInterrupt, a replay tool's stop signal) is not a branch outcome.
        if outcome is not None and not isinstance(outcome, Exception | Suspend | BranchCancelled):
            raise outcome
