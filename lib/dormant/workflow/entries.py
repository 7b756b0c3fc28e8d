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

from collections.abc import Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

from pydantic import ValidationError

from dormant.workflow.caller import Caller
from dormant.workflow.history import (
    BranchRecord,
    CallbackInfo,
    EntryKind,
    EntryStatus,
    ErrorInfo,
    HistoryEntry,
    RecordedMessage,
    Row,
    StoredHistory,
    entry_of,
)

# Enum `.value` is a slow descriptor in CPython 3.11; these run once per committed entry.
_KIND_TEXT = {kind: kind.value for kind in EntryKind}
_STATUS_TEXT = {status: status.value for status in EntryStatus}
_KIND_OF = {kind.value: kind for kind in EntryKind}
_STATUS_OF = {status.value: status for status in EntryStatus}
_PENDING = EntryStatus.PENDING
_new = object.__new__
_FAILURE_KINDS = frozenset(("critical", "timeout", "exhausted"))
_NO_MESSAGES: list[Received] = cast("list[Received]", ())
_NO_BRANCHES: dict[str, BranchRecord] = cast("dict[str, BranchRecord]", MappingProxyType({}))


class Received:
    """A message a queue wait took: RecordedMessage's fields in a slotted record (the engine's working copy, made per
    message received; the model is the storage boundary's). `to_json` writes exactly what
    `RecordedMessage.model_dump(mode="json", exclude_defaults=True)` writes."""

    __slots__ = ("body", "completable", "completed", "created_at", "id", "name", "sender")

    def __init__(self, id: str, name: str, body: Any, created_at: float, completed: bool = False,
                 sender: Caller | None = None, completable: bool | None = None) -> None:
        self.id = id
        self.name = name
        self.body = body
        self.created_at = created_at
        self.completed = completed
        self.sender = sender  # who sent it (None: recorded before senders were, or sent in-process)
        self.completable = completable  # whether the receive was (None: recorded before receives said)

    def __repr__(self) -> str:
        return f"Received({self.name!r}, {self.id!r})"

    @staticmethod
    def from_model(model: RecordedMessage) -> Received:
        return Received(model.id, model.name, model.body, model.created_at, model.completed, model.sender,
                        model.completable)

    @staticmethod
    def from_json(data: Any) -> Received | None:
        """A stored message read as RecordedMessage would read it; None when a field is not exactly what the model
        writes (the caller lets the models convert or refuse it)."""
        if type(data) is not dict or not data.keys() <= _MESSAGE_FIELDS:
            return None
        id, name, created_at = data["id"], data["name"], data["created_at"]
        completed, sender, completable = data.get("completed", False), data.get("sender"), data.get("completable")
        if (type(id) is not str or type(name) is not str or type(completed) is not bool
                or (completable is not None and type(completable) is not bool)
                or (type(created_at) is not float and type(created_at) is not int)):
            return None
        return Received(id, name, data["body"], float(created_at), completed,
                        Caller.model_validate(sender) if sender is not None else None, completable)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "body": self.body, "created_at": self.created_at}
        if self.completed:
            data["completed"] = True
        if self.sender is not None:
            data["sender"] = self.sender.model_dump(mode="json", exclude_defaults=True)
        if self.completable is not None:
            data["completable"] = self.completable
        return data


_MESSAGE_FIELDS = frozenset(RecordedMessage.model_fields)


class Entry:
    """One recorded workflow decision (the fields and meaning of HistoryEntry).

    The fields every entry uses are slots; the ones only some kinds use (a sleep's deadline, a loop's iteration, a
    queue wait's messages, ...) are class attributes holding their default, set on the instance (in its `__dict__`,
    made on the first such write) only by an entry that uses them: a step, most of a history, carries none, and
    weighs half of what a slot for every field weighed. Entries without messages or branches share immutable empty
    ones: a queue wait assigns its `messages`, a join or race is created with its own `branches`.
    A map's `items` is the list it was created with, never changed in place.

    Such a field is set only by `put` (the type checker sees them read-only), which also keeps the instance's dict in
    `extra` (None until the first): `to_json` and the size bound look in it for the fields of some kinds, where
    reading fifteen class attributes through the instance cost more than the rest of `to_json` (a class attribute
    read through an instance is not specialized by this interpreter; the dict cannot be asked for without making it)."""

    __slots__ = ("__dict__", "attempts", "created_at", "ended_at", "error", "extra", "kind", "location", "name",
                 "output", "seq", "started_at", "status", "updated_at")

    extra: dict[str, Any] | None  # the instance's dict once a field of some kinds was put, else None

    if TYPE_CHECKING:  # (read-only to the type checker: written by `put` only, which keeps `extra`)
        @property
        def retry_at(self) -> float | None: ...
        @property
        def throttled_since(self) -> float | None: ...
        @property
        def failure_kind(self) -> str | None: ...
        @property
        def rollback_done(self) -> bool: ...
        @property
        def rollback_error(self) -> ErrorInfo | None: ...
        @property
        def deadline(self) -> float | None: ...
        @property
        def iteration(self) -> int: ...
        @property
        def loop_state(self) -> Any: ...
        @property
        def messages(self) -> list[Received]: ...
        @property
        def timed_out(self) -> bool: ...
        @property
        def branches(self) -> dict[str, BranchRecord]: ...
        @property
        def winner(self) -> str | None: ...
        @property
        def items(self) -> list[Any] | None: ...
        @property
        def removed_kind(self) -> str | None: ...
        @property
        def callback(self) -> CallbackInfo | None: ...

    else:  # the fields of some kinds only: their defaults (see the class docstring)
        retry_at = None
        throttled_since = None  # waits for its limit since (dormant.workflow.throttle)
        failure_kind = None  # a failed step: critical, timeout or exhausted
        rollback_done = False
        rollback_error = None
        deadline = None  # sleep / queue timeout
        iteration = 0  # loop
        loop_state = None
        messages = _NO_MESSAGES  # queue
        timed_out = False
        branches = _NO_BRANCHES  # join / race
        winner = None
        items = None  # map
        removed_kind = None  # removed placeholder
        callback = None  # callback

    def put(self, field: str, value: Any) -> None:
        """Set a field of some kinds (one of `RARE_FIELDS`) on this entry."""
        extra = self.extra
        if extra is None:
            extra = self.extra = self.__dict__  # (made here: the instance's dict, which attribute reads look in)
        extra[field] = value

    def __init__(self, location: str, kind: EntryKind, name: str, seq: int,
                 status: EntryStatus = EntryStatus.PENDING, output: Any = None, error: ErrorInfo | None = None,
                 attempts: int = 0, retry_at: float | None = None, rollback_done: bool = False,
                 rollback_error: ErrorInfo | None = None, deadline: float | None = None, iteration: int = 0,
                 loop_state: Any = None, messages: list[Received] = _NO_MESSAGES, timed_out: bool = False,
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
        self.started_at = started_at  # the last attempt's run: its duration is ended_at - started_at
        self.ended_at = ended_at
        self.created_at = created_at
        self.updated_at = updated_at
        self.extra = None
        # the fields of some kinds: set only when not their default (no instance dict for an entry that has none)
        if retry_at is not None:
            self.put("retry_at", retry_at)
        if throttled_since is not None:
            self.put("throttled_since", throttled_since)
        if failure_kind is not None:
            self.put("failure_kind", failure_kind)
        if rollback_done:
            self.put("rollback_done", rollback_done)
        if rollback_error is not None:
            self.put("rollback_error", rollback_error)
        if deadline is not None:
            self.put("deadline", deadline)
        if iteration:
            self.put("iteration", iteration)
        if loop_state is not None:
            self.put("loop_state", loop_state)
        if messages is not _NO_MESSAGES:
            self.put("messages", messages)
        if timed_out:
            self.put("timed_out", timed_out)
        if branches is not _NO_BRANCHES:
            self.put("branches", branches)
        if winner is not None:
            self.put("winner", winner)
        if items is not None:
            self.put("items", items)
        if removed_kind is not None:
            self.put("removed_kind", removed_kind)
        if callback is not None:
            self.put("callback", callback)

    def __repr__(self) -> str:
        return f"Entry({self.kind.value} {self.location!r}, {self.status.value})"

    def __reduce__(self) -> tuple[Any, ...]:
        # (copy and pickle go through the stored form: a copy of the slots would share this entry's dict as `extra`)
        return _entry_of_json, (self.to_json(),)

    @staticmethod
    def fresh(location: str, kind: EntryKind, name: str, seq: int, at: float) -> Entry:
        """`Entry(location, kind, name, seq, created_at=at, updated_at=at)`: a new entry, every field of some kinds at
        its default, without binding `__init__`'s 28 parameters and testing the fields of some kinds (half the work:
        a run makes an entry per step and per message)."""
        entry = _new(Entry)
        entry.location, entry.kind, entry.name, entry.seq, entry.status = location, kind, name, seq, _PENDING
        entry.output = entry.error = entry.started_at = entry.ended_at = entry.extra = None
        entry.attempts = 0
        entry.created_at = entry.updated_at = at
        return entry

    @staticmethod
    def from_model(model: HistoryEntry) -> Entry:
        """A working copy: nothing the run changes is shared with `model`."""
        return Entry(
            model.location, model.kind, model.name, model.seq, model.status, model.output, model.error,
            model.attempts, model.retry_at, model.rollback_done, model.rollback_error, model.deadline,
            model.iteration, model.loop_state,
            [Received.from_model(m) for m in model.messages] if model.messages else _NO_MESSAGES, model.timed_out,
            {b: r.model_copy() for b, r in model.branches.items()} if model.branches else _NO_BRANCHES,
            model.winner, model.items, model.removed_kind, model.created_at, model.updated_at, model.started_at,
            model.ended_at, model.throttled_since, model.callback.model_copy() if model.callback is not None else None,
            model.failure_kind)

    @staticmethod
    def from_row(row: Row) -> Entry | None:
        """`from_json` of a stored row (dormant.workflow.history.Row), without making its dict."""
        shape = row[0]
        if len(shape) < 4 or shape[0] != "location" or shape[1] != "kind" or shape[2] != "name" or shape[3] != "seq":
            return Entry.from_json(entry_of(row))  # (not as to_json orders them)
        location, name, seq = row[1], row[3], row[4]
        kind = _KIND_OF.get(row[2]) if type(row[2]) is str else None
        if kind is None or type(location) is not str or type(name) is not str or type(seq) is not int:
            return None
        entry = Entry(location, kind, name, seq)
        try:
            for index in range(4, len(shape)):  # (the first four are taken above)
                check = _FIELDS.get(shape[index])
                if check is not None and not check(entry, row[index + 1]):
                    return None
        except (ValidationError, TypeError, KeyError):
            return None
        return entry

    @staticmethod
    def from_json(data: dict[str, Any]) -> Entry | None:
        """A working copy of a stored entry, read straight from its JSON, checked field by field as HistoryEntry
        would check it; None when a field is not exactly what HistoryEntry itself writes (a type pydantic would
        convert, a value it would refuse): the caller validates that entry as a model, which converts or gives
        pydantic's error. Values are shared with `data`, as a model's are (the store never changes them)."""
        try:
            location, kind, name, seq = data["location"], _KIND_OF[data["kind"]], data["name"], data["seq"]
        except (KeyError, TypeError):
            return None
        if type(location) is not str or type(name) is not str or type(seq) is not int:
            return None
        entry = Entry(location, kind, name, seq)
        try:
            for key, value in data.items():
                check = _FIELDS.get(key)
                if check is not None and not check(entry, value):
                    return None
        except (ValidationError, TypeError, KeyError):
            return None
        return entry

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
        extra = self.extra
        if extra is not None and "retry_at" in extra and extra["retry_at"] is not None:
            data["retry_at"] = extra["retry_at"]
        if self.started_at is not None:
            data["started_at"] = self.started_at
        if self.ended_at is not None:
            data["ended_at"] = self.ended_at
        if extra is not None:
            _rare_json(extra, data)
        if self.created_at != 0.0:
            data["created_at"] = self.created_at
        if self.updated_at != 0.0:
            data["updated_at"] = self.updated_at
        return data


def _rare_json(extra: dict[str, Any], data: dict[str, Any]) -> None:
    """Entry.to_json's fields of some kinds but `retry_at` (set by `Entry.put`: kept in `extra`), each left out at
    its default, in HistoryEntry's order. Only the fields put are looked at (an entry has one or two: a queue wait
    its messages, a loop its iteration and state), in that order."""
    for field in extra if len(extra) == 1 else sorted(extra, key=_RARE_ORDER.__getitem__):
        value = extra[field]
        if field in _RAW_UNLESS_NONE:
            if value is not None:
                data[field] = value
        elif field == "messages":
            if value:
                data["messages"] = [m.to_json() for m in value]
        elif field in _TRUE_IF_SET:  # (rollback_done, timed_out)
            if value:
                data[field] = True
        elif field == "iteration":
            if value:
                data["iteration"] = value
        elif field == "branches":
            if value:
                data["branches"] = {b: r.model_dump(mode="json", exclude_defaults=True) for b, r in value.items()}
        elif field in _MODEL_DUMPED and value is not None:
            data[field] = value.model_dump(mode="json", exclude_defaults=True)
        # (retry_at: written before started_at, by to_json itself)


RARE_FIELDS = ("retry_at", "throttled_since", "failure_kind", "rollback_done", "rollback_error", "deadline",
               "iteration", "loop_state", "messages", "timed_out", "branches", "winner", "items", "removed_kind",
               "callback")
"""The fields of some kinds only (`Entry.put` sets them), in HistoryEntry's order."""
_RARE_ORDER = {field: position for position, field in enumerate(RARE_FIELDS)}
_RAW_UNLESS_NONE = frozenset(("throttled_since", "failure_kind", "deadline", "loop_state", "winner", "items",
                              "removed_kind"))
_TRUE_IF_SET = frozenset(("rollback_done", "timed_out"))
_MODEL_DUMPED = frozenset(("rollback_error", "callback"))
assert _RAW_UNLESS_NONE | _TRUE_IF_SET | _MODEL_DUMPED | {"retry_at", "messages", "iteration", "branches"} == set(
    RARE_FIELDS), "_rare_json writes every field of some kinds"


def _entry_of_json(data: dict[str, Any]) -> Entry:
    """An entry from its stored form (`Entry.__reduce__`): read straight from the JSON, or through the model where
    that read leaves it to the model."""
    entry = Entry.from_json(data)
    return entry if entry is not None else Entry.from_model(HistoryEntry.model_validate(data))


# ---- reading stored JSON (Entry.from_json): one check per field, True when it took the value -----------------------
def _time(value: Any) -> float | None:
    """A float field's value as pydantic gives it (an int becomes a float); raises TypeError on anything else."""
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise TypeError


def _setter(field: str) -> Any:
    """How a check stores `field`: `Entry.put` for a field of some kinds (it keeps `Entry.extra`), else a slot's
    plain write."""
    return Entry.put if field in RARE_FIELDS else setattr


def _set_status(entry: Entry, value: Any) -> bool:
    entry.status = _STATUS_OF[value]
    return True


def _set_int(field: str) -> Any:
    set_field = _setter(field)

    def check(entry: Entry, value: Any) -> bool:
        if type(value) is not int:
            return False
        if value:
            set_field(entry, field, value)
        return True
    return check


def _set_flag(field: str) -> Any:
    set_field = _setter(field)

    def check(entry: Entry, value: Any) -> bool:
        if type(value) is not bool:
            return False
        if value:
            set_field(entry, field, value)
        return True
    return check


def _set_time(field: str, optional: bool) -> Any:
    set_field = _setter(field)

    def check(entry: Entry, value: Any) -> bool:
        if value is None:
            return optional
        set_field(entry, field, _time(value))
        return True
    return check


def _set_text(field: str) -> Any:
    set_field = _setter(field)

    def check(entry: Entry, value: Any) -> bool:
        if value is not None and type(value) is not str:
            return False
        if value is not None:
            set_field(entry, field, value)
        return True
    return check


def _set_any(field: str) -> Any:
    set_field = _setter(field)

    def check(entry: Entry, value: Any) -> bool:
        if value is not None:
            set_field(entry, field, value)
        return True
    return check


def _set_error(field: str) -> Any:
    set_field = _setter(field)

    def check(entry: Entry, value: Any) -> bool:
        if value is not None:
            set_field(entry, field, ErrorInfo.model_validate(value))
        return True
    return check


def _set_failure_kind(entry: Entry, value: Any) -> bool:
    if value is not None and value not in _FAILURE_KINDS:
        return False
    if value is not None:
        entry.put("failure_kind", value)
    return True


def _set_messages(entry: Entry, value: Any) -> bool:
    if type(value) is not list:
        return False
    if value:
        messages = [Received.from_json(m) for m in value]
        if any(m is None for m in messages):
            return False  # (the models decide: they convert or refuse)
        entry.put("messages", messages)
    return True


def _set_branches(entry: Entry, value: Any) -> bool:
    if type(value) is not dict or any(type(b) is not str for b in value):
        return False
    if value:
        entry.put("branches", {b: BranchRecord.model_validate(r) for b, r in value.items()})
    return True


def _set_items(entry: Entry, value: Any) -> bool:
    if value is not None and type(value) is not list:
        return False
    if value is not None:
        entry.put("items", list(value))  # pydantic's list[Any] is a new list too
    return True


def _set_callback(entry: Entry, value: Any) -> bool:
    if value is not None:
        entry.put("callback", CallbackInfo.model_validate(value))
    return True


def _taken(entry: Entry, value: Any) -> bool:  # location, kind, name, seq: read before the others
    return True


_FIELDS: dict[str, Any] = {
    "location": _taken, "kind": _taken, "name": _taken, "seq": _taken, "status": _set_status,
    "output": _set_any("output"), "error": _set_error("error"), "attempts": _set_int("attempts"),
    "retry_at": _set_time("retry_at", True), "started_at": _set_time("started_at", True),
    "ended_at": _set_time("ended_at", True), "throttled_since": _set_time("throttled_since", True),
    "failure_kind": _set_failure_kind, "rollback_done": _set_flag("rollback_done"),
    "rollback_error": _set_error("rollback_error"), "deadline": _set_time("deadline", True),
    "iteration": _set_int("iteration"), "loop_state": _set_any("loop_state"), "messages": _set_messages,
    "timed_out": _set_flag("timed_out"), "branches": _set_branches, "winner": _set_text("winner"),
    "items": _set_items, "removed_kind": _set_text("removed_kind"), "callback": _set_callback,
    "created_at": _set_time("created_at", False), "updated_at": _set_time("updated_at", False),
}
assert set(_FIELDS) == set(HistoryEntry.model_fields), "every field of HistoryEntry is read"


def working_copies(entries: Sequence[HistoryEntry]) -> list[Entry]:
    """The engine's working records of a loaded history: from a StoredHistory's JSON when every item is read whole
    (no model per entry), else from its models (validated: a stored item that is not an entry raises pydantic's
    ValidationError, as a load always did)."""
    if isinstance(entries, StoredHistory):
        copies = []
        for data in entries.stored:
            entry = (Entry.from_json(data) if type(data) is dict else Entry.from_row(data) if type(data) is tuple
                     else None)
            if entry is None:
                break
            copies.append(entry)
        else:
            return copies
        entries = entries.models()
    return [Entry.from_model(e) for e in entries]
