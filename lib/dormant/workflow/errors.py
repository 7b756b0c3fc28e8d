"""Exceptions raised by the workflow engine to user code and to the runtime."""

from __future__ import annotations

from typing import Any


class DormantError(Exception):
    """Base class of every error Dormant raises on purpose."""


class InvalidJsonError(DormantError, ValueError):
    """A value cannot be stored: it does not round-trip through JSON (see dormant.workflow.values).

    `path` locates the offending part (`$.items[3].name`), `rule` says what is wrong; neither holds the value.
    """

    def __init__(self, message: str, *, path: str = "$", rule: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.rule = rule


class InvalidStateError(DormantError):
    """A step, action, hook or rollback handler left the actor's state not matching its model."""


class WorkflowDefinitionError(DormantError):
    """The workflow code uses the API wrongly (bad name, duplicate entry, missing checkpoint...)."""


class StepOnlyError(DormantError):
    """State, vars, client or broadcast used outside a step or an action."""


_LINE_BREAKS = {ord(ch): f"\\x{ord(ch):02x}" if ord(ch) <= 0xFF else f"\\u{ord(ch):04x}"
                for ch in "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"} | {ord("\n"): "\\n", ord("\r"): "\\r"}


def one_line(text: str) -> str:
    """`text` with every line break (each character `str.splitlines` breaks at) written as its escape, as
    dormant.core.safetext writes it (``\\n``, ``\\u2028``): a name keeps to its line in a message of several."""
    return text.translate(_LINE_BREAKS)


class HistoryDivergedError(DormantError):
    """The code no longer matches the recorded history of this actor.

    Attributes say where (`location`), what history recorded (`recorded`, as "kind name"),
    what the code asked for (`requested`) and where in the user's code (`code_site`).
    """

    def __init__(self, *, location: str, recorded: str | None, requested: str | None,
                 code_site: str | None, hint: str) -> None:
        self.location = location
        self.recorded = recorded
        self.requested = requested
        self.code_site = code_site
        self.hint = hint
        where = location or "<root>"
        lines = [  # each on its line: names (which code may take from data) cannot break one
            f"history diverged at {one_line(where)}",
            f"  history has:   {one_line(recorded or 'nothing more')}",
            f"  code asks for: {one_line(requested or 'nothing more (the scope finished)')}",
        ]
        if code_site:
            lines.append(f"  code:          {one_line(code_site)}")
        lines.append(f"  {one_line(hint)}")
        super().__init__("\n".join(lines))

    def to_dict(self) -> dict[str, Any]:
        return {"location": self.location, "recorded": self.recorded, "requested": self.requested,
                "code_site": self.code_site, "message": str(self)}


class StepFailedError(DormantError):
    """A step attempt failed (raised inside the engine; user code sees StepExhaustedError)."""


class StepTimeoutError(DormantError):
    """A step attempt ran longer than its `timeout` and was cancelled."""


class StepExhaustedError(DormantError):
    """A step failed on every attempt it was allowed (or raised NonRetryableError).

    `kind` says how: "critical" (it raised NonRetryableError), "timeout" (its last attempt timed out) or
    "exhausted" (its retries ran out); `ctx.try_step` returns it as `StepResult.failure.kind`."""

    def __init__(self, step: str, attempts: int, error_type: str, error_message: str,
                 kind: str = "exhausted") -> None:
        self.step = step
        self.attempts = attempts
        self.error_type = error_type
        self.error_message = error_message
        self.kind = kind
        super().__init__(f'step "{step}" failed after {attempts} attempt(s): {error_type}: {error_message}')


class NonRetryableError(DormantError):
    """Raise inside a step to fail it at once, without further retries."""


class WorkflowTimeoutError(DormantError):
    """The workflow ran past its deadline (`actor(..., workflow_timeout=...)`): the run fails with it (recorded as the
    workflow's error, after its rollback), and no workflow code can catch it."""


class QueueTimeoutError(DormantError):
    """`queue.next(timeout=...)` expired before a message arrived."""


class BranchError(DormantError):
    """A branch of a join or race failed; `.errors` maps branch name to its error."""

    def __init__(self, kind: str, name: str, errors: dict[str, Exception]) -> None:
        self.name = name
        self.errors = errors
        detail = "; ".join(f"{b}: {type(e).__name__}: {e}" for b, e in errors.items())
        super().__init__(f'{kind} "{name}" failed: {detail}')


class JoinError(BranchError):
    def __init__(self, name: str, errors: dict[str, Exception]) -> None:
        super().__init__("join", name, errors)


class RaceError(BranchError):
    def __init__(self, name: str, errors: dict[str, Exception]) -> None:
        super().__init__("race", name, errors)


class MapError(DormantError):
    """A map's completion rule can no longer be met. `.reason` says which rule failed, `.errors` maps each failed
    item's index to its error (the recorded form, as JoinError's), `.result` is the MapResult: every item's outcome,
    the ones that succeeded included."""

    MAX_SHOWN = 5  # item errors quoted in the message; all of them are in `.errors`

    def __init__(self, name: str, reason: str, errors: dict[int, Exception], result: Any) -> None:
        self.name = name
        self.reason = reason
        self.errors = errors
        self.result = result
        shown = [f"item {i}: {e}" for i, e in list(errors.items())[:self.MAX_SHOWN]]
        if len(errors) > self.MAX_SHOWN:
            shown.append(f"and {len(errors) - self.MAX_SHOWN} more")
        super().__init__(f'map "{name}" failed: {reason}' + (f"; {'; '.join(shown)}" if shown else ""))


class RecordedError(DormantError):
    """An error replayed from history: the original exception type is kept by name."""

    def __init__(self, error_type: str, message: str) -> None:
        self.error_type = error_type
        super().__init__(f"{error_type}: {message}")


class RollbackCheckpointError(WorkflowDefinitionError):
    """A step with a `rollback` handler ran before any `rollback_checkpoint` in its scope."""


class EntryInProgressError(WorkflowDefinitionError):
    """Two entries were started at once in one scope (a missing `await`?)."""


class CallbackError(DormantError):
    """A callback's wait ended without a result (`cb.result()`); `.callback` is its name. Catchable, recorded: a
    replay raises the same error."""

    def __init__(self, callback: str, message: str) -> None:
        self.callback = callback
        super().__init__(message)


class CallbackFailedError(CallbackError):
    """The outside system failed the callback (`{"error": {"type": ..., "message": ...}}`)."""

    def __init__(self, callback: str, error_type: str, error_message: str) -> None:
        self.error_type = error_type
        self.error_message = error_message
        super().__init__(callback, f'callback "{callback}" was failed by the outside system: {error_type}: '
                                   f"{error_message}")


class CallbackTimeoutError(CallbackError):
    """The callback's `timeout` passed before a completion arrived."""


class CallbackHeartbeatTimeoutError(CallbackTimeoutError):
    """No heartbeat (and no completion) arrived within the callback's `heartbeat_timeout`."""


class CallbackCancelledError(CallbackError):
    """The callback's scope ended before its result was awaited (a loop iteration, a race branch that lost)."""


class CallbackUrlError(DormantError):
    """`cb.url` with no public URL configured: set DORMANT_PUBLIC_URL (`dormant dev` sets its own URL)."""
