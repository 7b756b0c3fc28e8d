"""Listing actors by type and status, and deleting them: the same contract on MemoryEventStore and on the
DynamoDB store over a moto server and over dynalite; the deletion's crash and stale-writer cases on DynamoDB."""

from __future__ import annotations

from typing import Any

import pytest

from dormant.dynamodb.store import DynamoEventStore
from dormant.errors import InvalidCursorError, StorageError, VersionConflict
from dormant.ports import ActorRef, EventStore, WakeError
from dormant.workflow.history import WorkflowRecord, WorkflowState
from tests.integration.conftest import watch
from tests.integration.test_store_contract import T0, any_store, created, draft, message, meta

__all__ = ["any_store"]  # the fixture, imported to be used here


def counter(key: str) -> ActorRef:
    return ActorRef(name="counter", key=(key, "x/y"))


def record(state: WorkflowState) -> WorkflowRecord:
    return WorkflowRecord(state=state)


async def listing(store: EventStore, actor_type: str, status: WorkflowState | None = None,
                  limit: int = 100) -> list[tuple[str, str]]:
    """Every (first key part, status) of a listing, following its cursors; no actor twice."""
    seen: list[tuple[str, str]] = []
    cursor = None
    for _ in range(50):
        page = await store.list_actors(actor_type, status=status, limit=limit, after=cursor)
        assert len(page.actors) <= limit
        seen += [(summary.key[0], summary.status.value) for summary in page.actors]
        cursor = page.cursor
        if cursor is None:
            break
    assert len(seen) == len(set(seen))
    return seen


async def test_actors_are_listed_by_type_and_status_in_pages(any_store: EventStore) -> None:
    states = {"a": WorkflowState.SLEEPING, "b": WorkflowState.FAILED, "c": WorkflowState.COMPLETED,
              "d": WorkflowState.RUNNING, "e": None, "f": WorkflowState.FAILED}
    for key, state in states.items():
        actor = await created(any_store, key)
        if state is not None:
            assert await any_store.commit(actor, 1, draft(workflow=record(state), at=T0 + 5)) == 2
    other = ActorRef(name="other", key=("a",))
    assert await any_store.create(other, meta().model_copy(update={"name": "other", "key": ("a",)}), {},
                                  WorkflowRecord(), [])
    everything = await listing(any_store, "counter")
    # by status, then by id; `running` is listed as sleeping (a wake-up in progress)
    assert everything == [("c", "completed"), ("b", "failed"), ("f", "failed"), ("e", "pending"), ("a", "sleeping"),
                          ("d", "sleeping")]
    assert await listing(any_store, "counter", limit=1) == everything
    assert await listing(any_store, "counter", limit=4) == everything
    assert await listing(any_store, "counter", WorkflowState.FAILED) == [("b", "failed"), ("f", "failed")]
    assert await listing(any_store, "counter", WorkflowState.FAILED, limit=1) == [("b", "failed"), ("f", "failed")]
    assert await listing(any_store, "counter", WorkflowState.DIVERGED) == []
    assert await listing(any_store, "other") == [("a", "pending")]
    assert await listing(any_store, "nobody") == []
    summary = await any_store.read_summary(counter("b"))
    assert summary is not None and (summary.name, summary.key, summary.status) == ("counter", ("b", "x/y"),
                                                                                   WorkflowState.FAILED)
    assert (summary.since, summary.version, summary.created_at) == (T0 + 5, 2, T0)
    assert await any_store.read_summary(counter("nobody")) is None


async def test_a_commit_that_keeps_the_status_does_not_rewrite_it(any_store: EventStore) -> None:
    actor = await created(any_store)
    await any_store.commit(actor, 1, draft(workflow=record(WorkflowState.SLEEPING), at=T0 + 1))
    for version, state in ((2, WorkflowState.RUNNING), (3, WorkflowState.SLEEPING), (4, None)):
        # mid-wake-up `running`, back to sleeping, an action (no workflow change): none of them moves the listing
        await any_store.commit(actor, version, draft(workflow=record(state) if state else None,
                                                     state={"value": version}, at=T0 + version))
    summary = await any_store.read_summary(actor)
    assert summary is not None and (summary.status, summary.version, summary.since) == (WorkflowState.SLEEPING, 2,
                                                                                        T0 + 1)
    await any_store.commit(actor, 5, draft(workflow=record(WorkflowState.COMPLETED), at=T0 + 9))
    summary = await any_store.read_summary(actor)
    assert summary is not None and (summary.status, summary.version, summary.since) == (WorkflowState.COMPLETED, 6,
                                                                                        T0 + 9)


@pytest.mark.parametrize("cursor", ["", "garbage", "failed#", "failed#other/a", "running#counter/a",
                                    "sleeping#counter/a"])
async def test_a_cursor_from_elsewhere_is_refused(any_store: EventStore, cursor: str) -> None:
    await created(any_store)
    with pytest.raises(InvalidCursorError, match="cursor"):
        await any_store.list_actors("counter", status=WorkflowState.FAILED, after=cursor)


async def test_delete_removes_everything_and_a_later_create_starts_fresh(any_store: EventStore) -> None:
    actor = await created(any_store, state={"value": 7})
    await any_store.enqueue(actor, message("m1"))
    await any_store.enqueue(actor, message("m2"))
    await any_store.commit(actor, 1, draft(consumed=["m1"], responses={"m1": "ok"}, events=[("e", 1)],
                                           state={"value": 8}, workflow=record(WorkflowState.SLEEPING)))
    await any_store.record_wake_error(actor, WakeError(message="boom", at=T0))
    assert await any_store.delete(actor)
    assert await any_store.load(actor) is None
    assert not await any_store.exists(actor)
    assert await any_store.read_summary(actor) is None
    assert await listing(any_store, "counter") == []
    assert await any_store.read_events(actor, 0, 10) == []
    if isinstance(any_store, DynamoEventStore):
        assert await partition(any_store, actor) == []
    assert not await any_store.delete(actor)  # safe to run again: nothing left, nothing to do
    # A new life: version 1, the initial state, an empty inbox, and message ids seen before are new again.
    assert await any_store.create(actor, meta(), {"value": 0}, WorkflowRecord(), [])
    snapshot = await any_store.load(actor)
    assert snapshot is not None and (snapshot.version, snapshot.state, snapshot.inbox) == (1, {"value": 0}, [])
    assert snapshot.wake_error is None
    assert await any_store.enqueue(actor, message("m1"))
    assert await listing(any_store, "counter") == [("a", "pending")]


async def test_delete_of_an_actor_never_created_removes_its_early_messages(any_store: EventStore) -> None:
    actor = counter("early")
    assert await any_store.enqueue(actor, message("m1"))
    assert not await any_store.delete(actor)
    assert await any_store.create(actor, meta("early"), {"value": 0}, WorkflowRecord(), [])
    snapshot = await any_store.load(actor)
    assert snapshot is not None and snapshot.inbox == []


async def partition(store: DynamoEventStore, actor: ActorRef) -> list[str]:
    response = await store.client.query(TableName=store.table, ConsistentRead=True, KeyConditionExpression="pk = :pk",
                                        ExpressionAttributeValues={":pk": {"S": actor.id}})
    return sorted(item["sk"]["S"] for item in response["Items"])


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
