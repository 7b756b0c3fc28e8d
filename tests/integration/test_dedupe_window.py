"""Message de-duplication follows one rule on every store (dormant.core.dedupe): an id is a duplicate while its message
is pending and for the dedupe window after the commit that consumed it; then the same id is a new message, and its
fingerprint is the new one's. Each store runs on a clock the test moves (the DynamoDB store's own, the memory store's
given one, as TestEnv's virtual clock is)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from dormant.core.dedupe import dedupe_expiry
from dormant.dynamodb.keys import inbox_key, item_key
from dormant.dynamodb.store import DynamoEventStore
from dormant.dynamodb.table import TTL_ATTRIBUTE
from dormant.memory.store import MemoryEventStore
from dormant.ports import ActorMeta, ActorRef, EventStore, InboxMessage
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import WorkflowRecord
from tests.integration.conftest import server_for, shared_session, store_settings

WINDOW = 3600
T0 = 4_102_444_800.0  # 2100-01-01: far past any real clock, so no server's TTL deletes an item during the test


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "dynamodb_local", "moto", "dynalite"])
async def clocked(request: pytest.FixtureRequest) -> AsyncIterator[tuple[EventStore, Clock]]:
    """A store with a dedupe window of WINDOW seconds on a clock the test moves, and a ring of 2 (a DynamoDB store's
    tombstones are written by every other commit: the commit that starts a window, on every store)."""
    clock = Clock()
    if request.param == "memory":
        yield MemoryEventStore(dedupe_ttl_seconds=WINDOW, clock=clock, snapshot_every=2), clock
        return
    server = server_for(request, request.param)
    settings = store_settings(server.endpoint, dedupe_ttl_seconds=WINDOW, snapshot_every=2)
    async with DynamoEventStore.connect(settings, session=shared_session(), clock=clock) as store:
        await store.create_table()
        yield store, clock
    server.reset()


ACTOR = ActorRef(name="counter", key=("a",))


def message(mid: str, body: Any, clock: Clock) -> InboxMessage:
    return InboxMessage(id=mid, queue="counter", body=body, created_at=clock.now)


async def commit(store: EventStore, version: int, clock: Clock, *consumed: str) -> int:
    return await store.commit(ACTOR, version, CommitDraft(
        upserts=[], deleted_prefixes=[], state={"version": version + 1}, consumed_ids=list(consumed), responses={},
        events=[], workflow=None, committed_at=clock.now))


async def inbox(store: EventStore) -> list[tuple[str, Any]]:
    snapshot = await store.load(ACTOR)
    assert snapshot is not None
    return [(m.id, m.body) for m in snapshot.inbox]


async def test_an_id_is_a_duplicate_while_pending_and_for_the_window_after_its_consumption(
        clocked: tuple[EventStore, Clock]) -> None:
    store, clock = clocked
    assert await store.create(ACTOR, ActorMeta(name="counter", key=("a",), created_at=clock.now), {}, WorkflowRecord(),
                              [])
    first = message("k", 1, clock)
    assert await store.enqueue(ACTOR, first)
    clock.now += 5 * WINDOW  # pending: a duplicate however long it waits
    assert not await store.enqueue(ACTOR, message("k", 2, clock))
    assert await store.message_fingerprint(ACTOR, "k") == first.fingerprint()
    assert await inbox(store) == [("k", 1)]
    consumed_at = clock.now
    version = await commit(store, 1, clock, "k")
    for _ in range(3):  # past the next snapshot: the DynamoDB store has written the tombstone
        version = await commit(store, version, clock)
    clock.now = consumed_at + WINDOW - 1
    assert not await store.enqueue(ACTOR, message("k", 3, clock))
    assert await store.message_fingerprint(ACTOR, "k") == first.fingerprint()  # an idempotency key still compares
    assert await inbox(store) == []
    clock.now = consumed_at + WINDOW  # the window has ended: the same id is a new message
    assert await store.message_fingerprint(ACTOR, "k") is None
    again = message("k", 4, clock)
    assert await store.enqueue(ACTOR, again)
    assert await store.message_fingerprint(ACTOR, "k") == again.fingerprint()
    assert await inbox(store) == [("k", 4)]
    assert not await store.enqueue(ACTOR, message("k", 5, clock))  # pending again: a duplicate again


@pytest.mark.parametrize("server_name", ["dynamodb_local", "moto", "dynalite"])
async def test_a_tombstone_written_before_the_rule_keeps_its_window(request: pytest.FixtureRequest,
                                                                    server_name: str) -> None:
    """Tombstones of earlier releases carry `expires_at` = their write time + the window (a snapshot commit after the
    consuming one wrote them): read through this code, the id is a duplicate until then and a new message after, also
    while the expired item waits for DynamoDB's TTL to delete it (which may take days, and dynalite never does)."""
    clock = Clock()
    server = server_for(request, server_name)
    settings = store_settings(server.endpoint, dedupe_ttl_seconds=WINDOW)
    async with DynamoEventStore.connect(settings, session=shared_session(), clock=clock) as store:
        await store.create_table()
        assert await store.create(ACTOR, ActorMeta(name="counter", key=("a",), created_at=clock.now), {},
                                  WorkflowRecord(), [])
        old = message("old", {"v": 1}, clock)
        written_at = clock.now + 120  # the snapshot commit that wrote it, two minutes after the consuming one
        await store.client.put_item(TableName=store.table, Item={
            **item_key(ACTOR.id, inbox_key("old")), "t": {"N": "3"}, "h": {"S": old.fingerprint()},
            TTL_ATTRIBUTE: {"N": str(int(written_at + WINDOW))}})
        clock.now = written_at + WINDOW - 1
        assert not await store.enqueue(ACTOR, message("old", {"v": 2}, clock))
        assert await store.message_fingerprint(ACTOR, "old") == old.fingerprint()
        clock.now = written_at + WINDOW
        assert await store.message_fingerprint(ACTOR, "old") is None
        assert await store.enqueue(ACTOR, message("old", {"v": 3}, clock))
        assert await inbox(store) == [("old", {"v": 3})]
    server.reset()


def test_a_tombstone_expires_at_the_consuming_commits_time_plus_the_window_rounded_up() -> None:
    assert dedupe_expiry(100.0, 60) == 160
    assert dedupe_expiry(100.25, 60) == 161  # never before the window's end
