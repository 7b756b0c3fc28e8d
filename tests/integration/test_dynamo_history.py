"""The DynamoDB store's load hands the history as the entries' JSON (StoredHistory), as the memory store does: a
wake-up replays it without a model per entry, and a corrupted stored entry fails with pydantic's error as a load of
models did (tests/unit/test_entries.py has the memory store's side)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from dormant.dynamodb.store import DynamoEventStore
from dormant.ports import ActorMeta, ActorRef
from dormant.workflow.entries import working_copies
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import HistoryEntry, StoredHistory, WorkflowRecord
from tests.unit.test_entries import stored

pytestmark = pytest.mark.parametrize("store", ["dynamodb_local"], indirect=True)


async def _written(store: DynamoEventStore, change: dict[str, Any] | None = None) -> ActorRef:
    """The fixture's actor (tests/unit/fixtures) written through the store, its first entry updated by `change`."""
    data = stored()
    ref = ActorRef(name="mixed", key=("one",))
    history = data["history"]
    history[0] = {**history[0], **(change or {})}
    assert await store.create(ref, ActorMeta.model_validate(data["meta"]), data["state"], WorkflowRecord(), [])
    await store.commit(ref, 1, CommitDraft(upserts=history, deleted_prefixes=[], state=None, consumed_ids=[],
                                           responses={}, events=[],
                                           workflow=WorkflowRecord.model_validate(data["workflow"])))
    return ref


async def test_a_load_from_dynamodb_builds_the_engines_records_without_a_model_per_entry(
        store: DynamoEventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = await _written(store)
    loaded = await DynamoEventStore(store.client, store.settings, blobs=store.values.blobs).load(ref)  # (not cached)
    assert loaded is not None and isinstance(loaded.history, StoredHistory)

    def no_models(self: StoredHistory) -> list[HistoryEntry]:
        raise AssertionError("the engine's records were built from models")
    with monkeypatch.context() as patched:
        patched.setattr(StoredHistory, "models", no_models)
        copies = working_copies(loaded.history)
    expected = [HistoryEntry.model_validate(item) for item in stored()["history"]]
    assert [copy.to_model() for copy in copies] == expected == list(loaded.history)
    as_models = loaded.model_copy(update={"history": expected})
    assert loaded.model_dump(mode="json") == as_models.model_dump(mode="json")  # (dumps as the models it stands for)


async def test_a_corrupted_entry_in_dynamodb_fails_as_a_load_of_models_did(store: DynamoEventStore) -> None:
    ref = await _written(store, {"seq": "not a number"})
    loaded = await DynamoEventStore(store.client, store.settings, blobs=store.values.blobs).load(ref)
    assert loaded is not None
    with pytest.raises(ValidationError) as before:  # what the load raised when it validated a model per entry
        [HistoryEntry.model_validate(item) for item in loaded.history.stored]  # type: ignore[attr-defined]
    with pytest.raises(ValidationError) as building:  # what a wake-up's first read of it raises now
        working_copies(loaded.history)
    with pytest.raises(ValidationError) as reading:  # history(), an operator's reset: the models
        list(loaded.history)
    assert "seq" in str(before.value)
    assert before.value.errors()[0]["loc"][-1] == building.value.errors()[0]["loc"][-1] == "seq"
    assert building.value.errors()[0]["type"] == reading.value.errors()[0]["type"] == before.value.errors()[0]["type"]
