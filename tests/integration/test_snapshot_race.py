"""A load's two Queries (the ring, the `pending` index) run concurrently, so the server may answer the inbox's before
a snapshot commit of another process and the ring's after it. That snapshot commit first tombstones the messages its
chain consumed, and its own chain then starts afresh: the load must still hide them (docs/storage.md, "Loads")."""

from __future__ import annotations

import secrets
import time

import pytest

from dormant.dynamodb.items import commit_payload
from dormant.dynamodb.messages import Pending
from dormant.dynamodb.ring import TOMBSTONED
from dormant.dynamodb.store import DynamoEventStore
from dormant.ports import ActorMeta, ActorRef
from dormant.workflow.history import WorkflowRecord, WorkflowState
from tests.contract.support import T0, draft, message


async def test_a_load_whose_inbox_read_came_before_a_snapshot_commit_hides_what_that_chain_consumed(
        store: DynamoEventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    actor = ActorRef(name="counter", key=("a",))
    assert await store.create(actor, ActorMeta(name="counter", key=actor.key, created_at=T0), {"value": 0},
                              WorkflowRecord(state=WorkflowState.SLEEPING), [])
    lap = store.settings.snapshot_every
    version = 1
    for index in range(lap - 1):  # a chain of deltas, each consuming one message (not tombstoned yet)
        assert await store.enqueue(actor, message(f"m{index}"))
        version = await store.commit(actor, version, draft(consumed=[f"m{index}"], at=T0 + index + 1))
    assert await store.enqueue(actor, message("last"))
    other = DynamoEventStore(store.client, store.settings, blobs=store.values.blobs)  # another process
    early = await other.messages.pending(actor)  # its inbox Query, answered before the snapshot commit
    assert [item["sk"]["S"] for item in early.messages] == [*(f"i#m{i}" for i in range(lap - 1)), "i#last"]
    snapshot = await store.commit(actor, version, draft(consumed=["last"], at=T0 + lap))  # tombstones the chain's
    assert snapshot == lap + 1

    async def answered_early(ref: ActorRef) -> Pending:
        return early

    monkeypatch.setattr(other.messages, "pending", answered_early)
    loaded = await other.load(actor)  # its ring Query, answered after
    assert loaded is not None and loaded.version == snapshot
    assert loaded.inbox == []  # nothing consumed comes back


async def test_the_list_of_what_a_snapshot_tombstoned_never_makes_its_commit_too_big(store: DynamoEventStore) -> None:
    """The list rides along only while the item fits: without it the snapshot commit is what it was before."""
    actor = ActorRef(name="counter", key=("a",))
    assert await store.create(actor, ActorMeta(name="counter", key=actor.key, created_at=T0), {"value": 0},
                              WorkflowRecord(state=WorkflowState.SLEEPING), [])
    store.item_limit = 12_000  # the live history is tiny; the ids of the lap's consumed messages are not
    version = 1
    for index in range(store.settings.snapshot_every):
        ids = [f"{index:02d}-{n:02d}-{secrets.token_hex(90)}" for n in range(10)]
        for mid in ids:
            assert await store.enqueue(actor, message(mid))
        version = await store.commit(actor, version, draft(consumed=ids, at=T0 + index + 1))
    items = await store.ring.items(actor)
    newest = max(items, key=lambda item: int(item["v"]["N"]))
    assert "snap" in newest and int(newest["v"]["N"]) == version
    assert TOMBSTONED not in commit_payload(newest)  # 150 ids of 190 bytes: over the limit with them
    loaded = await DynamoEventStore(store.client, store.settings, blobs=store.values.blobs).load(actor)
    assert loaded is not None and (loaded.version, loaded.inbox) == (version, [])


async def test_an_id_sent_again_after_its_window_is_new_although_the_snapshot_lists_it(
        store: DynamoEventStore) -> None:
    """The list keeps each consumption's time: a message sent again once its tombstone has expired is not hidden by
    the snapshot that wrote that tombstone (still the chain's snapshot)."""
    now = [float(int(time.time()))]
    settings = store.settings.model_copy(update={"dedupe_ttl_seconds": 60})
    clocked = DynamoEventStore(store.client, settings, clock=lambda: now[0], blobs=store.values.blobs)
    actor = ActorRef(name="counter", key=("a",))
    assert await clocked.create(actor, ActorMeta(name="counter", key=actor.key, created_at=T0), {"value": 0},
                                WorkflowRecord(state=WorkflowState.SLEEPING), [])
    assert await clocked.enqueue(actor, message("again"))
    version = await clocked.commit(actor, 1, draft(consumed=["again"], at=T0 + 1))
    now[0] += 61  # the window after that consumption has ended
    while version <= settings.snapshot_every:  # up to the snapshot that tombstones it (and lists it)
        version = await clocked.commit(actor, version, draft(state={"value": version}, at=T0 + version))
    newest = max(await clocked.ring.items(actor), key=lambda item: int(item["v"]["N"]))
    assert "snap" in newest and [mid for mid, _ in commit_payload(newest)[TOMBSTONED]] == ["again"]
    assert await clocked.enqueue(actor, message("again"))  # over the expired tombstone: a new message
    loaded = await DynamoEventStore(store.client, settings, clock=lambda: now[0],
                                    blobs=store.values.blobs).load(actor)
    assert loaded is not None and [m.id for m in loaded.inbox] == ["again"]
