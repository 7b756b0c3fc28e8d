"""`Entry`: the engine's working copy of one history entry, a slotted record.

`HistoryEntry` (history.py) is the pydantic model at the storage boundary: what stores load and clients
read. A run holds every live entry of the actor and creates one per step, so the engine keeps them in
this lighter form (a pydantic model carries a field dict and a fields-set per instance: about 1.5 KB each,
against about 0.3 KB here, and far fewer objects for the garbage collector to track) and converts at the
edges: `from_model` when a run starts, `to_json` when it commits. `to_json` writes exactly what
`HistoryEntry.model_dump(mode="json", exclude_defaults=True)` writes, so the stored format is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dormant.workflow.history import (
    BranchRecord,
    EntryKind,
    EntryStatus,
    ErrorInfo,
    HistoryEntry,
    RecordedMessage,
)


@dataclass(slots=True, eq=False)
class Entry:
    """One recorded workflow decision (the fields and meaning of HistoryEntry)."""

    location: str
    kind: EntryKind
    name: str
    seq: int
    status: EntryStatus = EntryStatus.PENDING
    output: Any = None
    error: ErrorInfo | None = None
    # step
    attempts: int = 0
    retry_at: float | None = None
    rollback_done: bool = False
    rollback_error: ErrorInfo | None = None
    # sleep / queue timeout
    deadline: float | None = None
    # loop
    iteration: int = 0
    loop_state: Any = None
    # queue
    messages: list[RecordedMessage] = field(default_factory=list)
    timed_out: bool = False
    # join / race
    branches: dict[str, BranchRecord] = field(default_factory=dict)
    winner: str | None = None
    # removed placeholder
    removed_kind: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0

    @staticmethod
    def from_model(model: HistoryEntry) -> Entry:
        """A working copy: nothing the run changes is shared with `model`."""
        return Entry(
            model.location, model.kind, model.name, model.seq, model.status, model.output, model.error,
            model.attempts, model.retry_at, model.rollback_done, model.rollback_error, model.deadline,
            model.iteration, model.loop_state, [m.model_copy() for m in model.messages], model.timed_out,
            {b: r.model_copy() for b, r in model.branches.items()}, model.winner, model.removed_kind,
            model.created_at, model.updated_at)

    def to_model(self) -> HistoryEntry:
        return HistoryEntry.model_validate(self.to_json())

    def to_json(self) -> dict[str, Any]:
        """The stored form: JSON, fields at their default left out (HistoryEntry's field order)."""
        data: dict[str, Any] = {"location": self.location, "kind": self.kind.value, "name": self.name,
                                "seq": self.seq}
        if self.status is not EntryStatus.PENDING:
            data["status"] = self.status.value
        if self.output is not None:
            data["output"] = self.output
        if self.error is not None:
            data["error"] = self.error.model_dump(mode="json", exclude_defaults=True)
        if self.attempts:
            data["attempts"] = self.attempts
        if self.retry_at is not None:
            data["retry_at"] = self.retry_at
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
        if self.removed_kind is not None:
            data["removed_kind"] = self.removed_kind
        if self.created_at != 0.0:
            data["created_at"] = self.created_at
        if self.updated_at != 0.0:
            data["updated_at"] = self.updated_at
        return data
