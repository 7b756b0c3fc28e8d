"""The engine's slotted `Entry` records store exactly what the pydantic `HistoryEntry` stores, and a
history written before the engine used them (tests/unit/fixtures) still loads, replays and completes."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from dormant.errors import WakeFailedError
from dormant.memory.history import CompactHistory
from dormant.memory.store import MemoryEventStore
from dormant.ports import ActorMeta, ActorRef
from dormant.testing import TestEnv
from dormant.workflow import entries as entries_module
from dormant.workflow.caller import Caller
from dormant.workflow.entries import RARE_FIELDS, Entry, Received, working_copies
from dormant.workflow.history import (
    BranchRecord,
    BranchStatus,
    EntryKind,
    EntryStatus,
    ErrorInfo,
    HistoryEntry,
    RecordedMessage,
    StoredHistory,
    WorkflowRecord,
    entry_of,
    row_of,
)
from tests.unit.fixtures.history_actor import registry

FIXTURE = Path(__file__).parent / "fixtures" / "history_before_entries.json"


def stored() -> dict[str, Any]:
    return dict(json.loads(FIXTURE.read_text()))


def samples() -> list[HistoryEntry]:
    """Entries of every kind and field: the fixture's, plus ones with errors and unusual values."""
    entries = [HistoryEntry.model_validate(item) for item in stored()["history"]]
    error = ErrorInfo(type="ValueError", message="bad")
    entries += [
        HistoryEntry(location="s", kind=EntryKind.STEP, name="s", seq=1, status=EntryStatus.FAILED, error=error,
                     attempts=4, retry_at=12.5, started_at=1.5, ended_at=1.75, rollback_error=error, created_at=1.0,
                     updated_at=2.0),
        HistoryEntry(location="c", kind=EntryKind.STEP, name="c", seq=2, status=EntryStatus.CANCELLED, output=0,
                     rollback_done=True),
        HistoryEntry(location="q", kind=EntryKind.MESSAGE, name="q", seq=3, timed_out=True, deadline=99.0,
                     messages=[RecordedMessage(id="m", name="jobs", body={"a": [1, None]}, created_at=3.0,
                                               completed=True)]),
        HistoryEntry(location="q2", kind=EntryKind.MESSAGE, name="q2", seq=3, status=EntryStatus.COMPLETED,
                     messages=[RecordedMessage(id="m1", name="jobs", body=None, created_at=0.0, completable=False,
                                               sender=Caller(kind="actor", id="a/b", claims={"name": "a"})),
                               RecordedMessage(id="m2", name="jobs", body=[1.5, "x"], created_at=-2.5,
                                               completable=True, sender=Caller(kind="anonymous", id="anonymous"))]),
        HistoryEntry(location="r", kind=EntryKind.RACE, name="r", seq=4, winner="a", branches={
            "a": BranchRecord(status=BranchStatus.COMPLETED, output=False),
            "b": BranchRecord(status=BranchStatus.FAILED, error=error), "c": BranchRecord()}),
        HistoryEntry(location="l", kind=EntryKind.LOOP, name="l", seq=5, iteration=3, loop_state={"k": ""},
                     output=""),
        HistoryEntry(location="x", kind=EntryKind.REMOVED, name="x", seq=6, removed_kind="step"),
        HistoryEntry(location="m", kind=EntryKind.MAP, name="m", seq=7, status=EntryStatus.FAILED, error=error,
                     items=[{"id": 1}, None, [True, 2.5], ""]),
        HistoryEntry(location="n", kind=EntryKind.MAP, name="n", seq=8, items=[]),  # an empty map keeps its []
        HistoryEntry(location="m/0", kind=EntryKind.MAP_ITEM, name="0", seq=9, status=EntryStatus.COMPLETED,
                     output={"ok": 1}),
    ]
    return entries


def test_entries_store_exactly_what_the_pydantic_model_stores() -> None:
    for model in samples():
        entry = Entry.from_model(model)
        assert entry.to_json() == model.model_dump(mode="json", exclude_defaults=True)
        assert list(entry.to_json()) == list(model.model_dump(mode="json", exclude_defaults=True))  # same order
        assert entry.to_model() == model


def test_a_working_copy_shares_nothing_it_changes_with_the_loaded_model() -> None:
    models = {m.location: m for m in samples()}
    race, queue_wait = models["r"], models["q"]
    entry, waited = Entry.from_model(race), Entry.from_model(queue_wait)
    entry.branches["c"].status = BranchStatus.CANCELLED
    waited.messages[0].completed = False
    assert race.branches["c"].status is BranchStatus.PENDING and queue_wait.messages[0].completed


async def test_a_history_written_before_the_slotted_entries_replays_and_completes() -> None:
    data = stored()
    store = MemoryEventStore()
    ref = ActorRef(name="mixed", key=("one",))
    await store.create(ref, ActorMeta.model_validate(data["meta"]), data["state"],
                       WorkflowRecord.model_validate(data["workflow"]), [])
    record = store._actors[ref.id]
    record.history = CompactHistory(data["history"])
    record.version = data["version"]
    before = json.loads(json.dumps(dict(record.history)))
    assert data["workflow"]["state"] == "sleeping"

    async with TestEnv(registry, store=store) as env:  # a deploy of today's code wakes it: a pure replay
        await env.run_until_idle()
        handle = env.client.get_or_create("mixed", ["one"])
        status = await handle.status()
        assert status.workflow == "sleeping" and status.divergence is None
        assert record.history == before  # replaying rewrote nothing
        await env.advance(3600)
        status = await handle.status()
        assert (status.workflow, status.output) == ("completed", 2)
        assert (await handle.state()).total == 6


def test_an_entry_read_straight_from_its_json_is_the_entry_read_from_its_model() -> None:
    for model in samples():
        stored_json = model.model_dump(mode="json", exclude_defaults=True)
        entry = Entry.from_json(stored_json)
        assert entry is not None, stored_json
        assert entry.to_json() == stored_json and entry.to_model() == model
        assert entry.__dict__ == {} or model.kind is not EntryKind.STEP or model.retry_at or model.rollback_done \
            or model.rollback_error  # a plain step sets none of the fields of some kinds only


def test_a_fresh_entry_is_the_entry_init_makes() -> None:
    """Entry.fresh (Execution.new_entry without fields of some kinds) sets every slot as __init__ does and no field of
    some kinds (no instance dict): the same JSON, the same attributes."""
    slots = [name for name in Entry.__slots__ if name != "__dict__"]
    for kind in EntryKind:
        for at in (0.0, 1767225600.25):
            made = Entry("loop/~3/a", kind, "a", 7, created_at=at, updated_at=at)
            fresh = Entry.fresh("loop/~3/a", kind, "a", 7, at)
            assert [getattr(fresh, name) for name in slots] == [getattr(made, name) for name in slots]
            assert fresh.to_json() == made.to_json() and fresh.to_model() == made.to_model()
            assert made.__dict__ == {} and fresh.__dict__ == {}


def test_an_entry_kept_as_a_row_reads_as_its_json_does() -> None:
    """The memory store keeps entries as rows (dormant.memory.history): read back, the same dict in the same order,
    and the same working record, also when the keys are not in to_json's order or the row is corrupt."""
    base = {"location": "s", "kind": "step", "name": "s", "seq": 1, "status": "completed", "output": 1}
    jsons = [model.model_dump(mode="json", exclude_defaults=True) for model in samples()]
    reordered = {"name": "s", "location": "s", "seq": 1, "kind": "step", "output": [1]}
    for item in [*jsons, reordered, {**base, "kind": "nope"}, {**base, "seq": None}, {**base, "attempts": "2"}]:
        row = row_of(item)
        assert entry_of(row) == item and list(entry_of(row)) == list(item)
        from_row, from_json = Entry.from_row(row), Entry.from_json(item)
        assert (from_row is None) == (from_json is None), item
        assert from_row is None or from_json is None or from_row.to_json() == from_json.to_json() == item
    assert row_of(jsons[0])[0] is row_of(dict(jsons[0]))[0]  # one key tuple per shape
    history = CompactHistory(jsons)
    assert dict(history) == {item["location"]: item for item in jsons} and history == CompactHistory(jsons)
    copies = working_copies(StoredHistory(history.rows()))
    assert [entry.to_json() for entry in copies] == jsons
    with pytest.raises(ValidationError):  # a corrupt row fails as its dict does
        working_copies(StoredHistory([row_of(base), row_of({**base, "kind": "nope"})]))


def test_what_pydantic_would_convert_or_refuse_goes_through_the_model() -> None:
    base = {"location": "s", "kind": "step", "name": "s", "seq": 1, "status": "completed", "output": 1}
    converted = working_copies(StoredHistory([{**base, "created_at": 3, "attempts": "2"}]))
    assert converted[0].attempts == 2 and converted[0].created_at == 3.0  # pydantic's lax conversions
    assert Entry.from_json({**base, "attempts": "2"}) is None
    assert working_copies(StoredHistory([{**base, "created_at": 3}]))[0].created_at == 3.0  # int -> float here too
    message = {"id": "m", "name": "q", "body": {}, "created_at": 1.0}
    for odd in ({**message, "created_at": True}, {**message, "completed": 1}, {**message, "id": 5},
                {**message, "completable": "yes"}, {**message, "extra": 1}):
        item = {**base, "messages": [odd]}
        assert Entry.from_json(item) is None  # the models decide: they convert, ignore or refuse
        try:
            expected: Any = TypeAdapter(list[HistoryEntry]).validate_python([item])[0].model_dump(
                mode="json", exclude_defaults=True)
        except ValidationError as error:
            expected = str(error)
        try:
            read: Any = working_copies(StoredHistory([item]))[0].to_json()
        except ValidationError as error:
            read = str(error)
        assert read == expected
    taken = Entry.from_json({**base, "messages": [{**message, "created_at": 3}]})
    assert taken is not None and type(taken.messages[0].created_at) is float  # int -> float, as the model reads it
    for corrupt in ({**base, "kind": "nope"}, {**base, "seq": None}, {**base, "status": 7}, {"location": "s"},
                    {**base, "messages": [{"id": "m"}]}, {**base, "error": "bad"},
                    {**base, "messages": [{**message, "created_at": "x"}]},
                    {**base, "messages": [{**message, "sender": {"kind": "nobody"}}]}):
        assert Entry.from_json(corrupt) is None
        expected = ""
        try:
            TypeAdapter(list[HistoryEntry]).validate_python([base, corrupt])  # what a load raised
        except ValidationError as error:
            expected = str(error)
        with pytest.raises(ValidationError) as raised:
            working_copies(StoredHistory([base, corrupt]))
        assert expected and str(raised.value) == expected


async def _fixture_store() -> tuple[MemoryEventStore, dict[str, Any]]:
    data = stored()
    store = MemoryEventStore()
    ref = ActorRef(name="mixed", key=("one",))
    await store.create(ref, ActorMeta.model_validate(data["meta"]), data["state"],
                       WorkflowRecord.model_validate(data["workflow"]), [])
    record = store._actors[ref.id]
    record.history = CompactHistory(data["history"])
    record.version = data["version"]
    return store, record.history


async def test_a_replay_on_the_memory_store_builds_no_model_per_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    store, _ = await _fixture_store()

    def no_models(self: StoredHistory) -> list[HistoryEntry]:
        raise AssertionError("a wake-up validated the loaded history as models")
    async with TestEnv(registry, store=store) as env:
        with monkeypatch.context() as patched:
            patched.setattr(StoredHistory, "models", no_models)
            await env.run_until_idle()  # replays the history up to its sleep
            await env.advance(3600)  # replays it again, then completes
        status = await env.client.get_or_create("mixed", ["one"]).status()
        assert (status.workflow, status.output) == ("completed", 2) and not env.failures


async def test_a_corrupted_stored_entry_fails_the_wake_up_with_pydantics_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store, history = await _fixture_store()
    woken: list[str] = []
    monkeypatch.setattr(registry.get("mixed"), "on_wake_fn", lambda c: woken.append(c.ref.id))
    location = next(iter(history))
    history[location] = {**history[location], "seq": "not a number"}
    async with TestEnv(registry, store=store) as env:
        with pytest.raises(ValidationError, match="seq"):
            await env.client.get_or_create("mixed", ["one"]).history()
        with pytest.raises(WakeFailedError) as failed:  # the wake-up fails with the load's error, every try
            await env.run_until_idle()
        assert isinstance(failed.value.__cause__, ValidationError) and "seq" in str(failed.value.__cause__)
        assert woken == []  # no user hook ran on a history that does not load


RARE_SAMPLES: dict[str, Any] = {
    "retry_at": 12.5, "throttled_since": 3.0, "failure_kind": "timeout", "rollback_done": True,
    "rollback_error": ErrorInfo(type="E", message="m"), "deadline": 99.0, "iteration": 3, "loop_state": {"k": 0},
    "messages": [Received("m", "jobs", {"a": 1}, 3.0)], "timed_out": True,
    "branches": {"a": BranchRecord(status=BranchStatus.COMPLETED, output=1)}, "winner": "a", "items": [],
    "removed_kind": "step", "callback": None}


def test_a_field_of_some_kinds_is_put_and_found_by_to_json() -> None:
    """Entry.put keeps the instance's dict in `extra`; to_json writes each field of some kinds from there, in the
    model's order, and leaves out one put back to its default; an entry that never had one has no `extra` (and no
    instance dict)."""
    assert set(RARE_SAMPLES) == set(RARE_FIELDS)
    plain = Entry.fresh("s", EntryKind.STEP, "s", 1, 2.0)
    plain.to_json()
    assert plain.extra is None
    defaults = {field: getattr(Entry, field) for field in RARE_FIELDS}
    for field, value in RARE_SAMPLES.items():
        if value is None:
            continue
        entry = Entry.fresh("s", EntryKind.STEP, "s", 1, 2.0)
        entry.put(field, value)
        assert entry.extra is entry.__dict__ and getattr(entry, field) is value
        made = Entry("s", EntryKind.STEP, "s", 1, created_at=2.0, updated_at=2.0, **{field: value})
        assert entry.to_json() == made.to_json() and list(entry.to_json()) == list(made.to_json())
        assert field in entry.to_json()
        entry.put(field, defaults[field])
        assert field not in entry.to_json() and entry.extra is entry.__dict__
    every = Entry.fresh("s", EntryKind.STEP, "s", 1, 2.0)
    for field in reversed(RARE_FIELDS):  # (put in another order than the model's)
        if RARE_SAMPLES[field] is not None:
            every.put(field, RARE_SAMPLES[field])
    model = every.to_model()
    assert list(every.to_json()) == list(model.model_dump(mode="json", exclude_defaults=True))


def test_the_type_checker_sees_the_fields_of_some_kinds_read_only() -> None:
    """The fields Entry declares read-only for mypy (so a write past `put` fails `mypy --strict`), the defaults it
    keeps at run time and RARE_FIELDS are the same fields; nothing in the library sets one by `setattr` with its
    name."""
    source = Path(entries_module.__file__).read_text()
    entry_class = next(node for node in ast.parse(source).body
                       if isinstance(node, ast.ClassDef) and node.name == "Entry")
    guard = next(node for node in entry_class.body if isinstance(node, ast.If)
                 and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
    read_only = {node.name for node in guard.body if isinstance(node, ast.FunctionDef)
                 and any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)}
    defaults = {target.id for node in guard.orelse if isinstance(node, ast.Assign) for target in node.targets
                if isinstance(target, ast.Name)}
    assert read_only == defaults == set(RARE_FIELDS)
    library = Path(entries_module.__file__).parents[1]
    for path in library.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                    and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)):
                assert node.args[1].value not in RARE_FIELDS, f"{path}: setattr of {node.args[1].value}"


def test_a_copied_entry_keeps_its_own_fields_of_some_kinds() -> None:
    """copy, deepcopy and pickle make an entry of its own (through its stored form), whose `extra` is its own dict:
    putting a field on the copy leaves the original as it was."""
    import copy
    import pickle

    original = Entry.fresh("q", EntryKind.MESSAGE, "q", 3, 2.0)
    original.put("deadline", 9.0)
    plain = Entry.fresh("s", EntryKind.STEP, "s", 1, 2.0)
    for make in (copy.copy, copy.deepcopy, lambda e: pickle.loads(pickle.dumps(e))):
        made = make(original)
        assert made is not original and made.to_json() == original.to_json()
        assert made.extra is made.__dict__ and made.extra is not original.extra
        made.put("timed_out", True)
        assert "timed_out" not in original.to_json() and original.extra == {"deadline": 9.0}
        assert make(plain).extra is None
    odd = Entry("s", EntryKind.STEP, "s", 1, attempts=True)  # (a bool: from_json leaves it to the model)
    assert Entry.from_json(odd.to_json()) is None and copy.copy(odd).attempts == 1


@given(st.lists(st.tuples(st.sampled_from([f for f in RARE_SAMPLES if RARE_SAMPLES[f] is not None]), st.booleans()),
                max_size=12))
def test_any_sequence_of_puts_stores_what_the_model_stores(puts: list[tuple[str, bool]]) -> None:
    """Fields of some kinds put in any order, some put back to their default, some put twice: to_json is what
    HistoryEntry stores for the fields' last values, keys in its order."""
    entry = Entry.fresh("s", EntryKind.STEP, "s", 1, 2.0)
    last: dict[str, Any] = {}
    for field, to_default in puts:
        value = getattr(Entry, field) if to_default else RARE_SAMPLES[field]
        entry.put(field, value)
        last[field] = value
    given_fields = {f: [m.to_json() for m in v] if f == "messages" else v for f, v in last.items() if v is not None}
    model = HistoryEntry.model_validate({**Entry.fresh("s", EntryKind.STEP, "s", 1, 2.0).to_json(), **given_fields})
    expected = model.model_dump(mode="json", exclude_defaults=True)
    assert entry.to_json() == expected and list(entry.to_json()) == list(expected)
    assert (entry.extra is None) == (not puts)
