"""Listing and deleting actors on the DynamoDB store: a deletion leaves nothing in the partition, its crash and
stale-writer cases, and what a listing costs in requests. What listing and deletion do, on every backend, is
tests/contract/test_listing.py's and test_deletion.py's."""

from __future__ import annotations

from typing import Any

import pytest

from dormant.dynamodb.store import DynamoEventStore
from dormant.errors import StorageError, VersionConflict
from dormant.ports import ActorRef, WakeError
from dormant.workflow.history import WorkflowRecord, WorkflowState
from tests.contract.support import T0, created, draft, message, meta
from tests.integration.conftest import watch


def counter(key: str) -> ActorRef:
    return ActorRef(name="counter", key=(key, "x/y"))


def record(state: WorkflowState) -> WorkflowRecord:
    return WorkflowRecord(state=state)


async def partition(store: DynamoEventStore, actor: ActorRef) -> list[str]:
    response = await store.client.query(TableName=store.table, ConsistentRead=True, KeyConditionExpression="pk = :pk",
                                        ExpressionAttributeValues={":pk": {"S": actor.id}})
    return sorted(item["sk"]["S"] for item in response["Items"])


async def test_a_deleted_actor_leaves_no_item_in_its_partition(store: DynamoEventStore) -> None:
    actor = await created(store, state={"value": 7})
    await store.enqueue(actor, message("m1"))
    await store.enqueue(actor, message("m2"))
    await store.commit(actor, 1, draft(consumed=["m1"], responses={"m1": "ok"}, events=[("e", 1)],
                                       state={"value": 8}, workflow=record(WorkflowState.SLEEPING)))
    await store.record_wake_error(actor, WakeError(message="boom", at=T0))
    await store.mark_attention(actor, "wake_error", T0)
    assert await partition(store, actor) != []
    assert await store.delete(actor)
    assert await partition(store, actor) == []


async def busy_actor(store: DynamoEventStore, commits: int) -> ActorRef:
    actor = await created(store)
    for version in range(1, commits + 1):
        await store.enqueue(actor, message(f"m{version}"))
        await store.commit(actor, version, draft(consumed=[f"m{version}"], events=[("n", version)],
                                                 state={"value": version}, workflow=record(WorkflowState.SLEEPING)))
    return actor


@pytest.mark.parametrize("commits", [3, 20])  # within the ring's first lap, and after it wrapped
async def test_an_interrupted_delete_leaves_the_actor_gone_and_finishes_when_run_again(
        store: DynamoEventStore, monkeypatch: pytest.MonkeyPatch, commits: int) -> None:
    actor = await busy_actor(store, commits)

    async def crash(*args: Any) -> None:
        raise StorageError("the operator's laptop went to sleep")

    monkeypatch.setattr("dormant.dynamodb.deletion.Deletion._delete_all_but_slot_zero", crash)
    with pytest.raises(StorageError):
        await store.delete(actor)
    monkeypatch.undo()
    other = DynamoEventStore(store.client, store.settings)  # another process: no cache of the actor
    assert await other.load(actor) is None
    assert not await other.exists(actor)
    assert not await other.create(actor, meta(), {"value": 0}, WorkflowRecord(), [])  # not while half-deleted
    with pytest.raises(VersionConflict):  # a writer that read the actor before the deletion loses
        await store.commit(actor, commits + 1, draft(state={"value": -1}))
    assert await other.delete(actor)
    assert await partition(store, actor) == []
    assert await other.create(actor, meta(), {"value": 0}, WorkflowRecord(), [])


async def test_a_late_commit_of_a_deleted_actor_never_reaches_its_next_life(store: DynamoEventStore) -> None:
    actor = await created(store, state={"value": 1})
    slow = DynamoEventStore(store.client, store.settings)  # a wake-up that read version 1 before the deletion
    assert await slow.load(actor) is not None
    assert await store.delete(actor)
    await slow.commit(actor, 1, draft(state={"value": 666}))  # lands in the deleted partition (slot 1)
    assert await store.load(actor) is None and not await store.exists(actor)
    assert await store.create(actor, meta(), {"value": 0}, WorkflowRecord(), [])
    for reader in (store, DynamoEventStore(store.client, store.settings)):
        snapshot = await reader.load(actor)
        assert snapshot is not None and (snapshot.version, snapshot.state) == (1, {"value": 0})
    assert await store.commit(actor, 1, draft(state={"value": 2})) == 2  # overwrites the leftover in slot 1
    with pytest.raises(VersionConflict):  # and the old life can never overwrite the new one
        await slow.commit(actor, 1, draft(state={"value": 667}))
    snapshot = await DynamoEventStore(store.client, store.settings).load(actor)
    assert snapshot is not None and (snapshot.version, snapshot.state) == (2, {"value": 2})


async def test_listing_requests_are_one_query_per_page(store: DynamoEventStore) -> None:
    for key in "abc":
        await created(store, key)
    log = watch(store.client)
    page = await store.list_actors("counter", limit=2)
    assert log.counts() == {"Query": 1} and len(page.actors) == 2 and page.cursor is not None
    log.clear()
    assert await store.read_summary(counter("a")) is not None
    assert log.counts() == {"GetItem": 1}
