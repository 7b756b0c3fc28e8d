"""`Entry`: the engine's working copy of one history entry, a slotted record.

`HistoryEntry` (history.py) is the pydantic model at the storage boundary: what stores load and clients
read. A run holds every live entry of the actor and creates one per step, so the engine keeps them in
this lighter form, a slotted object (a pydantic model carries a field dict and a fields-set per instance:
about 1.5 KB each, against about 0.35 KB here, and one object instead of five for the garbage collector to
track) and converts at the edges: `from_model` when a run starts, `to_json` when it commits. `to_json`
writes exactly what `HistoryEntry.model_dump(mode="json", exclude_defaults=True)` writes, so the stored
format is unchanged.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, cast

from dormant.workflow.history import (
    BranchRecord,
    CallbackInfo,
    EntryKind,
    EntryStatus,
    ErrorInfo,
    HistoryEntry,
    RecordedMessage,
)

# Enum `.value` is a slow descriptor in CPython 3.11; these run once per committed entry.
_KIND_TEXT = {kind: kind.value for kind in EntryKind}
_STATUS_TEXT = {status: status.value for status in EntryStatus}
_NO_MESSAGES: list[RecordedMessage] = cast("list[RecordedMessage]", ())
_NO_BRANCHES: dict[str, BranchRecord] = cast("dict[str, BranchRecord]", MappingProxyType({}))


class Entry:
    """One recorded workflow decision (the fields and meaning of HistoryEntry).

    Entries without messages or branches share immutable empty ones (one object fewer each for the
    collector): a queue wait assigns its `messages`, a join or race is created with its own `branches`.
    A map's `items` is the list it was created with, never changed in place."""

    __slots__ = ("attempts", "branches", "callback", "created_at", "deadline", "ended_at", "error", "failure_kind",
                 "items", "iteration", "kind", "location", "loop_state", "messages", "name", "output", "removed_kind",
                 "retry_at", "rollback_done", "rollback_error", "seq", "started_at", "status", "throttled_since",
                 "timed_out", "updated_at", "winner")

    def __init__(self, location: str, kind: EntryKind, name: str, seq: int,
                 status: EntryStatus = EntryStatus.PENDING, output: Any = None, error: ErrorInfo | None = None,
                 attempts: int = 0, retry_at: float | None = None, rollback_done: bool = False,
                 rollback_error: ErrorInfo | None = None, deadline: float | None = None, iteration: int = 0,
                 loop_state: Any = None, messages: list[RecordedMessage] = _NO_MESSAGES, timed_out: bool = False,
                 branches: dict[str, BranchRecord] = _NO_BRANCHES, winner: str | None = None,
                 items: list[Any] | None = None, removed_kind: str | None = None, created_at: float = 0.0,
                 updated_at: float = 0.0, started_at: float | None = None, ended_at: float | None = None,
                 throttled_since: float | None = None, callback: CallbackInfo | None = None,
                 failure_kind: str | None = None) -> None:
        self.location = location
        self.kind = kind
        self.name = name
        self.seq = seq
        self.status = status
        self.output = output
        self.error = error
        self.attempts = attempts  # step
        self.retry_at = retry_at
        self.started_at = started_at  # the last attempt's run: its duration is ended_at - started_at
        self.ended_at = ended_at
        self.throttled_since = throttled_since  # waits for its limit since (dormant.workflow.throttle)
        self.failure_kind = failure_kind  # a failed step: critical, timeout or exhausted
        self.rollback_done = rollback_done
        self.rollback_error = rollback_error
        self.deadline = deadline  # sleep / queue timeout
        self.iteration = iteration  # loop
        self.loop_state = loop_state
        self.messages = messages  # queue
        self.timed_out = timed_out
        self.branches = branches  # join / race
        self.winner = winner
        self.items = items  # map
        self.removed_kind = removed_kind  # removed placeholder
        self.callback = callback  # callback
        self.created_at = created_at
        self.updated_at = updated_at

    def __repr__(self) -> str:
        return f"Entry({self.kind.value} {self.location!r}, {self.status.value})"

    @staticmethod
    def from_model(model: HistoryEntry) -> Entry:
        """A working copy: nothing the run changes is shared with `model`."""
        return Entry(
            model.location, model.kind, model.name, model.seq, model.status, model.output, model.error,
            model.attempts, model.retry_at, model.rollback_done, model.rollback_error, model.deadline,
            model.iteration, model.loop_state,
            [m.model_copy() for m in model.messages] if model.messages else _NO_MESSAGES, model.timed_out,
            {b: r.model_copy() for b, r in model.branches.items()} if model.branches else _NO_BRANCHES,
            model.winner, model.items, model.removed_kind, model.created_at, model.updated_at, model.started_at,
            model.ended_at, model.throttled_since, model.callback.model_copy() if model.callback is not None else None,
            model.failure_kind)

    def to_model(self) -> HistoryEntry:
        return HistoryEntry.model_validate(self.to_json())

    def to_json(self) -> dict[str, Any]:
        """The stored form: JSON, fields at their default left out (HistoryEntry's field order)."""
        data: dict[str, Any] = {"location": self.location, "kind": _KIND_TEXT[self.kind], "name": self.name,
                                "seq": self.seq}
        if self.status is not EntryStatus.PENDING:
            data["status"] = _STATUS_TEXT[self.status]
        if self.output is not None:
            data["output"] = self.output
        if self.error is not None:
            data["error"] = self.error.model_dump(mode="json", exclude_defaults=True)
        if self.attempts:
            data["attempts"] = self.attempts
        if self.retry_at is not None:
            data["retry_at"] = self.retry_at
        if self.started_at is not None:
            data["started_at"] = self.started_at
        if self.ended_at is not None:
            data["ended_at"] = self.ended_at
        if self.throttled_since is not None:
            data["throttled_since"] = self.throttled_since
        if self.failure_kind is not None:
            data["failure_kind"] = self.failure_kind
        if self.rollback_done:
            data["rollback_done"] = True
        if self.rollback_error is not None:
            data["rollback_error"] = self.rollback_error.model_dump(mode="json", exclude_defaults=True)
        if self.deadline is not None:
            data["deadline"] = self.deadline
        if self.iteration:
            data["iteration"] = self.iteration
        if self.loop_state is not None:
            data["loop_state"] = self.loop_state
        if self.messages:
            data["messages"] = [m.model_dump(mode="json", exclude_defaults=True) for m in self.messages]
        if self.timed_out:
            data["timed_out"] = True
        if self.branches:
            data["branches"] = {b: r.model_dump(mode="json", exclude_defaults=True) for b, r in self.branches.items()}
        if self.winner is not None:
            data["winner"] = self.winner
        if self.items is not None:
            data["items"] = self.items
        if self.removed_kind is not None:
            data["removed_kind"] = self.removed_kind
        if self.callback is not None:
            data["callback"] = self.callback.model_dump(mode="json", exclude_defaults=True)
        if self.created_at != 0.0:
            data["created_at"] = self.created_at
        if self.updated_at != 0.0:
            data["updated_at"] = self.updated_at
        return data
