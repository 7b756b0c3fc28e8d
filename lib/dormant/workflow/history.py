"""History entries, locations and the workflow record: what one actor's log holds.

Everything here crosses the storage boundary, so it is pydantic and JSON-only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import StrEnum
from typing import Any, Literal, overload

from pydantic import BaseModel, Field, TypeAdapter

from dormant.workflow.caller import Caller
from dormant.workflow.errors import WorkflowDefinitionError

ITERATION_MARK = "~"
SEPARATOR = "/"


class EntryKind(StrEnum):
    STEP = "step"
    LOOP = "loop"
    SLEEP = "sleep"
    MESSAGE = "message"
    ROLLBACK_CHECKPOINT = "rollback_checkpoint"
    JOIN = "join"
    RACE = "race"
    MAP = "map"  # ctx.map: the items and how the map ended; each started item has a MAP_ITEM child
    MAP_ITEM = "map_item"  # one item of a map (named by its index): pending while it runs, then its outcome
    REMOVED = "removed"
    CALLBACK = "callback"
    VERSION_CHECK = "version_check"  # ctx.get_version: the resolved version is its output
    TRY = "try"  # ctx.try_: the block's value, or its failure (a TryFailure's JSON), is its output


KIND_ALIASES: dict[str, EntryKind] = {k.value: k for k in EntryKind} | {"queue": EntryKind.MESSAGE}


class EntryStatus(StrEnum):
    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"  # a step of a losing race branch or a decided map's item, cut short


class BranchStatus(StrEnum):
    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ErrorInfo(BaseModel):
    type: str
    message: str


class BranchRecord(BaseModel):
    status: BranchStatus = BranchStatus.PENDING
    output: Any = None
    error: ErrorInfo | None = None


class RecordedMessage(BaseModel):
    id: str
    name: str
    body: Any
    created_at: float
    completed: bool = False
    sender: Caller | None = None  # who sent it (None: recorded before senders were, or sent in-process)
    # Whether the receive was completable: a sender waiting on a message received without it learns at once
    # that no answer will come (None: recorded before receives recorded it).
    completable: bool | None = None


CallbackOutcome = Literal["completed", "failed", "timed_out", "heartbeat_timed_out", "cancelled"]
CallbackState = Literal["open", "completed", "failed", "timed_out", "cancelled"]


class CallbackInfo(BaseModel):
    """What a callback entry records beside its deadline (the entry's `deadline`: the timeout), its result
    (`output`) and its failure (`error`): the token handed out, so a replay hands out the same one."""

    token: str
    id: str  # the first 32 hex digits of the token's SHA-256
    # The id of its completion message, `dormant:callback:<id>`: None in a callback opened before it was recorded,
    # whose completion is `callback-<id>` (dormant.workflow.callbacks.completion_id).
    completion_id: str | None = None
    heartbeat_timeout: float | None = None
    heartbeat_deadline: float | None = None  # as last read by the workflow; heartbeats move it (docs/semantics.md)
    outcome: CallbackOutcome | None = None


class CallbackChange(BaseModel):
    """A callback opened or closed by a commit: the store keeps a lookup record per callback, by the token's hash
    (never the token), so that `POST /callbacks/{token}` finds the actor without knowing its key."""

    token_hash: str
    callback_id: str
    completion_id: str | None = None  # as CallbackInfo's (None: a callback opened before it was recorded)
    name: str
    location: str
    state: CallbackState
    deadline: float | None = None
    heartbeat_timeout: float | None = None
    heartbeat_deadline: float | None = None
    at: float = 0.0  # when the workflow opened or closed it (its clock)


class HistoryEntry(BaseModel):
    """One recorded workflow decision, addressed by its location path."""

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
    started_at: float | None = None  # when the last attempt began and ended (None: recorded before these were)
    ended_at: float | None = None
    throttled_since: float | None = None  # waiting for its limit's slot since then (ctx.step(limit=...))
    # a failed step: how (critical: NonRetryableError; timeout: its last attempt timed out; exhausted: its retries ran
    # out). None: a step recorded before this was (read as dormant.workflow.tries.failure_kind says)
    failure_kind: Literal["critical", "timeout", "exhausted"] | None = None
    rollback_done: bool = False
    rollback_error: ErrorInfo | None = None
    # sleep / queue timeout
    deadline: float | None = None
    # loop
    iteration: int = 0
    loop_state: Any = None
    # queue
    messages: list[RecordedMessage] = Field(default_factory=list)
    timed_out: bool = False
    # join / race
    branches: dict[str, BranchRecord] = Field(default_factory=dict)
    winner: str | None = None
    # map: the items as JSON, recorded when the map starts (replays compare the code's items with them)
    items: list[Any] | None = None
    # removed placeholder
    removed_kind: str | None = None
    # callback
    callback: CallbackInfo | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


_HISTORY = TypeAdapter(list[HistoryEntry])


Row = tuple[Any, ...]
"""A stored entry kept as a row (the memory store keeps them so: dormant.memory.history): its keys as one tuple, then
its values in that order. As a dict a completed step's eleven keys take CPython's next dict size (464 bytes, where ten
take 272); as a row it takes 136, its key tuple shared by every entry with the same keys."""

_SHAPES: dict[tuple[str, ...], tuple[str, ...]] = {}
MAX_SHAPES = 4096  # key tuples shared (an entry's keys are HistoryEntry's fields: far fewer sets in practice)


def row_of(entry: dict[str, Any]) -> Row:
    keys = tuple(entry)
    shape = _SHAPES.get(keys)
    if shape is None:
        shape = keys
        if len(_SHAPES) < MAX_SHAPES:
            _SHAPES[keys] = keys
    return (shape, *entry.values())


def entry_of(stored: Row | dict[str, Any]) -> dict[str, Any]:
    """A stored entry's JSON object (a row's dict, keys in their order; a dict as it is)."""
    if type(stored) is dict:
        return stored
    values = iter(stored)
    return dict(zip(next(values), values, strict=True))


class StoredHistory(Sequence[HistoryEntry]):
    """A loaded history as its store holds it (JSON objects), validated into HistoryEntry models only when read.

    A wake-up never reads it as models: the engine builds its own working records straight from the JSON
    (dormant.workflow.entries.working_copies), validating each field as it goes, and only an item that check does
    not accept whole goes through `models()`, whose error is then the one a load always gave. Everything else (an
    operator's reset, `history()`, timers) reads models, validated once, on first use."""

    __slots__ = ("_models", "stored")

    def __init__(self, stored: Sequence[dict[str, Any] | Row]) -> None:
        self.stored = stored  # the store's own objects (JSON objects, or rows: `Row`): never changed here
        self._models: list[HistoryEntry] | None = None

    def models(self) -> list[HistoryEntry]:
        """The entries as models (ValidationError on a stored item that is not an entry)."""
        if self._models is None:
            self._models = _HISTORY.validate_python([entry_of(item) if type(item) is tuple else item
                                                     for item in self.stored])
        return self._models

    @overload
    def __getitem__(self, index: int) -> HistoryEntry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[HistoryEntry]: ...
    def __getitem__(self, index: int | slice) -> HistoryEntry | Sequence[HistoryEntry]:
        return self.models()[index]

    def __len__(self) -> int:
        return len(self.stored)

    def __iter__(self) -> Iterator[HistoryEntry]:
        return iter(self.models())

    def __eq__(self, other: object) -> bool:  # as the list of models it stands for
        if isinstance(other, StoredHistory):
            return self.models() == other.models()
        return isinstance(other, list) and self.models() == other

    __hash__ = None  # type: ignore[assignment]  # (a list's: unhashable)

    def __repr__(self) -> str:
        return f"StoredHistory({len(self.stored)} entries)"


class WorkflowState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SLEEPING = "sleeping"
    COMPLETED = "completed"
    FAILED = "failed"
    DIVERGED = "diverged"
    ROLLING_BACK = "rolling_back"
    TERMINATED = "terminated"  # ended by an operator (dormant.runtime.operations); never runs again
    PAUSED = "paused"  # held by an operator: no wake-up runs it until unpaused (dormant.runtime.pausing)


class DivergenceInfo(BaseModel):
    location: str
    recorded: str | None
    requested: str | None
    code_site: str | None
    message: str


def _unset(value: Any) -> bool:
    return value is None


class OperatorNote(BaseModel):
    """An operator's action kept on the workflow record: what, who asked, why and when."""

    action: Literal["pause", "reset", "fork"]
    by: str | None = Field(None, description="Who asked (`kind:id` of the caller); null: the application itself")
    reason: str | None = None
    at: float = Field(description="When (epoch seconds)")
    detail: str | None = Field(None, description="What it did, e.g. which version a reset went back to")
    version: int | None = Field(None, description="reset and fork: the version of the history taken")
    previous: WorkflowState | None = Field(None, description="pause: the state that unpause restores")


class WorkflowRecord(BaseModel):
    """The workflow's status as stored with each commit: what it waits for, or why it stopped."""

    state: WorkflowState = WorkflowState.PENDING
    output: Any = None
    error: ErrorInfo | None = None
    divergence: DivergenceInfo | None = None
    waiting_for: list[str] = Field(default_factory=list)
    deadline: float | None = None
    retry_at: float | None = None
    rollback_attempts: int = 0
    limits: list[str] = Field(default_factory=list)  # the limits whose slots it waits for (then `deadline`: next try)
    # Written only when set (exclude_if): an actor no operator touched stores exactly what it stored before.
    paused: OperatorNote | None = Field(None, exclude_if=_unset)
    """While `paused`: who paused it, why, when, and the state to go back to."""
    rewritten: OperatorNote | None = Field(None, exclude_if=_unset)
    """The last time an operator rewrote this history: a reset in place, or the fork that created the actor."""


class QueuedMessage(BaseModel):
    """A message waiting in an actor's inbox, as the engine sees it."""

    id: str
    name: str
    body: Any
    created_at: float
    sender: Caller | None = None
    kind: Literal["queue", "callback"] = "queue"  # a callback's completion: its body says which and how


def child_location(parent: str, name: str) -> str:
    return f"{parent}{SEPARATOR}{name}" if parent else name


def iteration_location(loop_location: str, iteration: int) -> str:
    return f"{loop_location}{SEPARATOR}{ITERATION_MARK}{iteration}"


def parent_location(location: str) -> str:
    cut = location.rfind(SEPARATOR)
    return location[:cut] if cut >= 0 else ""


def validate_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not name:
        raise WorkflowDefinitionError(f"{what} name must be a non-empty string, got {name!r}")
    if SEPARATOR in name or name.startswith(ITERATION_MARK):
        raise WorkflowDefinitionError(
            f'{what} name {name!r} is invalid: names may not contain "{SEPARATOR}" '
            f'or start with "{ITERATION_MARK}" (both are used in locations)')
