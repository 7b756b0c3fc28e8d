"""The inspector's workflow-history document (`GET .../inspector/workflow-history`).

Modelled on RivetKit's inspector (`{history, workflowState, isWorkflowEnabled}`, entries with a
structured location, a tagged kind and per-entry metadata), with Dormant's own values: entries are
read from storage and listed in execution order (RivetKit sorts by key string and serves an
in-memory snapshot), kind tags are Dormant's entry kinds, times are epoch seconds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from dormant.workflow.history import ITERATION_MARK, SEPARATOR, EntryKind, ErrorInfo, HistoryEntry


class IterationMarker(BaseModel):
    """A loop iteration in a location: `{"loop": "counter-loop", "iteration": 3}`."""

    loop: str
    iteration: int


class EntryKindInfo(BaseModel):
    """`tag` is the entry kind (step, loop, sleep, message, rollback_checkpoint, join, race, map, map_item,
    removed, callback); `val` holds that kind's recorded values."""

    tag: EntryKind
    val: dict[str, Any]


class InspectorEntry(BaseModel):
    id: str = Field(description='The entry\'s location as a "/"-joined string (iterations as "~N")')
    location: list[str | IterationMarker] = Field(description="The location as names and iteration markers")
    kind: EntryKindInfo


class EntryMetadata(BaseModel):
    status: str
    error: ErrorInfo | None = None
    attempts: int = 0
    retryAt: float | None = None
    createdAt: float
    updatedAt: float
    rollbackCompleted: bool = False
    rollbackError: ErrorInfo | None = None


class InspectorHistory(BaseModel):
    entries: list[InspectorEntry]
    entryMetadata: dict[str, EntryMetadata]


class WorkflowHistoryResponse(BaseModel):
    """`history` is null for an actor without a workflow."""

    isWorkflowEnabled: bool
    workflowState: str | None
    history: InspectorHistory | None


def structured_location(location: str) -> list[str | IterationMarker]:
    parts: list[str | IterationMarker] = []
    previous = ""
    for part in location.split(SEPARATOR) if location else []:
        if part.startswith(ITERATION_MARK) and part[1:].isdigit():
            parts.append(IterationMarker(loop=previous, iteration=int(part[1:])))
        else:
            parts.append(part)
            previous = part
    return parts


def _kind_value(entry: HistoryEntry) -> dict[str, Any]:
    branches = {name: branch.model_dump(mode="json") for name, branch in entry.branches.items()}
    match entry.kind:
        case EntryKind.STEP:
            return {"name": entry.name, "output": entry.output,
                    "error": entry.error.model_dump() if entry.error else None}
        case EntryKind.LOOP:
            return {"name": entry.name, "state": entry.loop_state, "iteration": entry.iteration,
                    "output": entry.output}
        case EntryKind.SLEEP:
            return {"name": entry.name, "deadline": entry.deadline, "state": entry.status.value}
        case EntryKind.MESSAGE:
            return {"name": entry.name, "messages": [m.model_dump(mode="json") for m in entry.messages],
                    "timedOut": entry.timed_out, "deadline": entry.deadline}
        case EntryKind.JOIN:
            return {"name": entry.name, "branches": branches}
        case EntryKind.RACE:
            return {"name": entry.name, "winner": entry.winner, "branches": branches}
        case EntryKind.MAP:
            return {"name": entry.name, "items": entry.items or []}
        case EntryKind.MAP_ITEM:
            return {"name": entry.name, "index": int(entry.name), "output": entry.output}
        case EntryKind.CALLBACK:
            info = entry.callback
            return {"name": entry.name, "deadline": entry.deadline, "output": entry.output,
                    "token": info.token if info else None, "outcome": info.outcome if info else None,
                    "heartbeatTimeout": info.heartbeat_timeout if info else None,
                    "heartbeatDeadline": info.heartbeat_deadline if info else None}
        case EntryKind.REMOVED:
            return {"name": entry.name, "originalType": entry.removed_kind, "originalName": entry.name}
        case _:  # rollback_checkpoint
            return {"name": entry.name}


def workflow_history(*, enabled: bool, workflow_state: str | None,
                     entries: list[HistoryEntry]) -> WorkflowHistoryResponse:
    if not enabled:
        return WorkflowHistoryResponse(isWorkflowEnabled=False, workflowState=None, history=None)
    ordered = sorted(entries, key=lambda e: e.seq)
    return WorkflowHistoryResponse(
        isWorkflowEnabled=True, workflowState=workflow_state,
        history=InspectorHistory(
            entries=[InspectorEntry(id=e.location, location=structured_location(e.location),
                                    kind=EntryKindInfo(tag=e.kind, val=_kind_value(e))) for e in ordered],
            entryMetadata={e.location: EntryMetadata(status=e.status.value, error=e.error, attempts=e.attempts,
                                                     retryAt=e.retry_at, createdAt=e.created_at,
                                                     updatedAt=e.updated_at, rollbackCompleted=e.rollback_done,
                                                     rollbackError=e.rollback_error)
                           for e in ordered}))
