"""The engine's slotted `Entry` records store exactly what the pydantic `HistoryEntry` stores, and a
history written before the engine used them (tests/unit/fixtures) still loads, replays and completes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dormant.memory.store import MemoryEventStore
from dormant.ports import ActorMeta, ActorRef
from dormant.testing import TestEnv
from dormant.workflow.entries import Entry
from dormant.workflow.history import (
    BranchRecord,
    BranchStatus,
    EntryKind,
    EntryStatus,
    ErrorInfo,
    HistoryEntry,
    RecordedMessage,
    WorkflowRecord,
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
    record.history = {item["location"]: item for item in data["history"]}
    record.version = data["version"]
    before = json.loads(json.dumps(record.history))
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
