"""Offline replay: check an exported actor history against the current code, touching nothing.

The export is JSON lines: one `{"type": "actor", ...}` header (ref, version, meta, state, workflow)
followed by one `{"type": "entry", ...}` line per history entry. Replay runs the same engine path as a
live wake-up, with an empty inbox, the clock frozen at the export's last activity, and a host that
stops at the first step history does not have (nothing new ever runs).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dormant.actor import ActorDefinition, Registry
from dormant.core.flow import Limit, unknown_limit
from dormant.ports import ActorMeta, ActorRef, ActorSnapshot
from dormant.workflow.errors import DormantError
from dormant.workflow.execution import Execution
from dormant.workflow.history import (
    ITERATION_MARK,
    SEPARATOR,
    DivergenceInfo,
    EntryKind,
    EntryStatus,
    HistoryEntry,
    WorkflowRecord,
    WorkflowState,
)
from dormant.workflow.host import CommitDraft, Granted, Refused, SlotAsk, StepRun
from dormant.workflow.runner import TERMINAL, run_workflow
from dormant.workflow.signals import WakeAborted
from dormant.workflow.state_cell import StateCell


class ExportFormatError(DormantError):
    """The history file is not a Dormant export."""


class _Frontier(BaseException):
    """Replay reached a step that history does not have."""

    def __init__(self, location: str) -> None:
        self.location = location
        super().__init__(location)


def in_finished_iterations(history: Sequence[HistoryEntry]) -> int:
    """How many entries lie in loop iterations that finished: kept for the record (`history_keep`), but never walked
    again, since a loop resumes at its current iteration from its saved state. So a replay walks
    `len(history) - in_finished_iterations(history)` entries at most (what `history export` and `replay` say)."""
    loops = {e.location: e for e in history if e.kind is EntryKind.LOOP}
    count = 0
    for entry in history:
        for loop_location, loop in loops.items():
            head = loop_location + SEPARATOR + ITERATION_MARK
            if not entry.location.startswith(head):
                continue
            iteration = entry.location[len(head):].split(SEPARATOR, 1)[0]
            if iteration.isdigit() and (int(iteration) < loop.iteration or loop.status is EntryStatus.COMPLETED):
                count += 1
                break
    return count


def count_words(replayed: int, history: Sequence[HistoryEntry]) -> str:
    """What a replay of `history` walked, against what it holds: `5 of 21 recorded entries replayed (16 are in
    finished loop iterations, which a replay does not walk again)`."""
    kept = in_finished_iterations(history)
    words = f"{replayed} of {len(history)} recorded entries replayed"
    return words + (f" ({kept} are in finished loop iterations, which a replay does not walk again)" if kept else "")


@dataclass
class ReplayReport:
    ref: ActorRef
    outcome: str  # "ok" or "diverged"
    detail: str
    replayed: int
    divergence: DivergenceInfo | None = None  # where and how, when it diverged



def export_lines(snapshot: ActorSnapshot) -> Iterator[str]:
    header = {"type": "actor", "ref": snapshot.ref.model_dump(mode="json"), "version": snapshot.version,
              "meta": snapshot.meta.model_dump(mode="json"), "state": snapshot.state,
              "workflow": snapshot.workflow.model_dump(mode="json")}
    yield json.dumps(header)
    for entry in sorted(snapshot.history, key=lambda e: e.seq):
        yield json.dumps({"type": "entry", **entry.model_dump(mode="json", exclude_defaults=True)})


def parse_export(lines: Iterable[str]) -> ActorSnapshot:
    header: dict[str, Any] | None = None
    entries: list[HistoryEntry] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            kind = item.pop("type")
        except (ValueError, KeyError, AttributeError) as error:
            raise ExportFormatError(f"line {number}: not a history export line ({error})") from None
        if kind == "actor":
            header = item
        elif kind == "entry":
            entries.append(HistoryEntry.model_validate(item))
        else:
            raise ExportFormatError(f"line {number}: unknown line type {kind!r}")
    if header is None:
        raise ExportFormatError('no {"type": "actor"} header line')
    return ActorSnapshot(ref=ActorRef.model_validate(header["ref"]), version=header["version"],
                         meta=ActorMeta.model_validate(header["meta"]), state=header["state"],
                         workflow=WorkflowRecord.model_validate(header["workflow"]), history=entries, inbox=[])


class _ReplayHost:
    def __init__(self, definition: ActorDefinition, limits: Mapping[str, Limit]) -> None:
        self._definition = definition
        self._limits = limits

    def queue_names(self) -> list[str]:
        return sorted(self._definition.queues)

    def decode_body(self, queue: str, body: Any) -> Any:
        return self._definition.queue_spec(queue).decode(body)

    def encode_response(self, queue: str, response: Any) -> Any:
        return self._definition.queue_spec(queue).validate_response(queue, response)

    def step_context(self, run: StepRun) -> Any:
        raise _Frontier(run.location)

    def check_commit(self, draft: CommitDraft) -> None:
        """Offline replay stops at the first new step (its body never runs), so it never commits."""

    def check_limit(self, step: str, limit: str) -> None:
        if not isinstance(limit, str) or limit not in self._limits:
            raise unknown_limit(step, limit, self._limits)

    async def acquire_limit(self, ask: SlotAsk) -> Granted | Refused:
        raise _Frontier(ask.location)  # a step about to run: new (nothing new runs offline)

    async def release_limit(self, granted: Granted) -> None:
        """Never granted offline."""

    def callback_names(self) -> list[str]:
        return sorted(self._definition.callbacks)

    def decode_callback_result(self, name: str, value: Any) -> Any:
        return self._definition.callback_spec(name).decode(value)

    def new_callback_token(self, location: str) -> str:
        raise _Frontier(location)  # a new callback: replay stops there, as at a new step

    def callback_url(self, token: str) -> str | None:
        return None


async def replay_snapshot(registry: Registry, snapshot: ActorSnapshot) -> ReplayReport:
    definition = registry.get(snapshot.ref.name)
    if definition.workflow_fn is None:
        return ReplayReport(snapshot.ref, "ok", "the actor has no workflow", 0)
    frozen = max([snapshot.meta.created_at] + [e.updated_at for e in snapshot.history])

    async def discard(_: CommitDraft) -> None:
        return None

    record = snapshot.workflow
    if record.state is WorkflowState.PAUSED:  # replayed as what it was when paused (rolling back replays so)
        record = record.model_copy(update={"state": record.paused.previous if record.paused and
                                           record.paused.previous else WorkflowState.SLEEPING, "paused": None})
    if record.state in (*TERMINAL, WorkflowState.DIVERGED):
        # Replay finished actors too: re-run as if still running, to check the code still matches.
        record = record.model_copy(update={"state": WorkflowState.RUNNING})
    execution = Execution(host=_ReplayHost(definition, registry.limits), entries=snapshot.history, record=record,
                          state=StateCell(definition.state, snapshot.state), inbox=[], now=lambda: frozen,
                          checkpointer=discard, serial=True, workflow_input=snapshot.meta.input)
    try:
        result = await run_workflow(definition.workflow_fn, execution)
    except _Frontier as frontier:
        return ReplayReport(snapshot.ref, "ok", f"history replays cleanly; the next new step is "
                            f"{frontier.location}", execution.replayed)
    except WakeAborted as aborted:  # pragma: no cover - the checkpointer never fails
        raise aborted.cause from None
    if result.state is WorkflowState.DIVERGED and result.divergence is not None:
        return ReplayReport(snapshot.ref, "diverged", result.divergence.message, execution.replayed,
                            result.divergence)
    return ReplayReport(snapshot.ref, "ok", f"history replays cleanly; the workflow is {result.state.value}",
                        execution.replayed)
