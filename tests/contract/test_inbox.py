"""The inbox: enqueue before and after creation, duplicates and the dedupe window, fingerprints (how a reused
idempotency key is compared), the ids a load holds, send order, scheduled actions, and a running wake-up's
in-process wait for new messages (wait_inbox), on every backend."""

from __future__ import annotations

import asyncio

import pytest

from dormant.ports import EventStore, InboxMessage
from dormant.settings import Settings
from dormant.workflow.caller import Caller
from tests.contract.conftest import Backend
from tests.contract.support import T0, created, draft, message, ref


async def test_enqueue_is_idempotent_before_creation_and_after_consumption(store: EventStore) -> None:
    actor = ref()
    assert await store.enqueue(actor, message("m1", {"delta": 1}))  # before the actor exists
    assert not await store.enqueue(actor, message("m1", {"delta": 100}))  # a duplicate changes nothing
    await created(store)
    assert not await store.enqueue(actor, message("m1", {"delta": 100}))
    assert await store.enqueue(actor, message("m2", {"delta": 2}))
    snapshot = await store.load(actor)
    assert snapshot is not None
    assert [(m.id, m.body) for m in snapshot.inbox] == [("m1", {"delta": 1}), ("m2", {"delta": 2})]
    await store.commit(actor, 1, draft(consumed=["m1"], state={"value": 1}))
    assert not await store.enqueue(actor, message("m1", {"delta": 1000}))  # consumed: still a duplicate
    snapshot = await store.load(actor)
    assert snapshot is not None and [m.id for m in snapshot.inbox] == ["m2"]
    await store.commit(actor, 2, draft(consumed=["m2"]))
    assert not await store.enqueue(actor, message("m2"))
    assert not await store.enqueue(actor, message("m1"))
    snapshot = await store.load(actor)
    assert snapshot is not None and snapshot.inbox == []


async def test_inbox_keeps_send_order(store: EventStore) -> None:
    actor = ref()
    ids = [f"msg-{n:02d}-{'zyxwvutsrq'[n % 10]}" for n in range(12)]  # ids not in alphabetical send order
    for mid in ids[:4]:
        await store.enqueue(actor, message(mid))
    await created(store)
    for mid in ids[4:]:
        await store.enqueue(actor, message(mid))
    await store.enqueue(actor, message(ids[0]))  # a duplicate does not move the original
    snapshot = await store.load(actor)
    assert snapshot is not None and [m.id for m in snapshot.inbox] == ids
    await store.commit(actor, 1, draft(consumed=[ids[5], ids[1]]))
    snapshot = await store.load(actor)
    assert snapshot is not None and [m.id for m in snapshot.inbox] == [i for i in ids if i not in (ids[1], ids[5])]


async def test_every_kind_of_message_round_trips_with_its_sender_and_not_before(store: EventStore) -> None:
    actor = await created(store)
    sender = Caller(kind="jwt", id="user-7", claims={"sub": "user-7", "tenant": "t"}, scopes=("orders:write",))
    sent = [InboxMessage(id="s1", queue="reset", kind="action", args=[1, {"a": "b"}], created_at=T0,
                         not_before=T0 + 60),
            InboxMessage(id="q1", queue="counter", body={"delta": [1, "é", None]}, created_at=T0 + 1, sender=sender),
            InboxMessage(id="c1", queue="approval", kind="callback", body=True, created_at=T0 + 2)]
    for sent_message in sent:
        assert await store.enqueue(actor, sent_message)
    snapshot = await store.load(actor)
    assert snapshot is not None and snapshot.inbox == sent


async def test_fingerprints_identify_a_message_id_pending_and_after_consumption(store: EventStore) -> None:
    actor = await created(store)
    first = message("k1", {"delta": 1})
    assert await store.enqueue(actor, first)
    assert await store.message_fingerprint(actor, "k1") == first.fingerprint()
    assert await store.message_fingerprint(actor, "unknown") is None
    assert message("k1", {"delta": 1}).fingerprint() == first.fingerprint()  # times are not part of it
    assert message("k1", {"delta": 2}).fingerprint() != first.fingerprint()
    snapshot = await store.load(actor)
    assert snapshot is not None and snapshot.held_ids >= {"k1"}
    # Consumed, then through a whole ring of commits (the tombstone is written before the next snapshot):
    version = await store.commit(actor, 1, draft(consumed=["k1"], state={"value": 1}))
    for n in range(20):
        version = await store.commit(actor, version, draft(state={"value": n + 2}))
    assert await store.message_fingerprint(actor, "k1") == first.fingerprint()
    assert not await store.enqueue(actor, message("k1", {"delta": 2}))  # still a duplicate id
    loaded = await store.load(actor)
    assert loaded is not None and loaded.inbox == []


async def test_a_fingerprint_is_known_before_the_actor_exists(store: EventStore) -> None:
    actor = ref("early")
    early = message("e1", {"delta": 5})
    assert await store.enqueue(actor, early)
    assert await store.message_fingerprint(actor, "e1") == early.fingerprint()
    assert await store.message_fingerprint(ref("nobody"), "e1") is None


async def test_a_load_shows_the_ids_it_holds_so_a_wake_up_stores_only_missing_ones(store: EventStore) -> None:
    actor = await created(store)
    for mid in ("a", "b"):
        assert await store.enqueue(actor, message(mid))
    await store.commit(actor, 1, draft(consumed=["a"]))
    snapshot = await store.load(actor)
    assert snapshot is not None
    assert [m.id for m in snapshot.inbox] == ["b"]
    assert {"a", "b"} <= snapshot.held_ids  # "a" is consumed but still known: nothing to store for it


async def test_wait_inbox_returns_messages_not_known_as_they_arrive(store: EventStore) -> None:
    actor = await created(store)
    await store.enqueue(actor, message("m1"))
    snapshot = await store.load(actor)
    assert snapshot is not None
    # Consumed by a commit, not yet tombstoned in the DynamoDB store: never returned as new.
    await store.commit(actor, snapshot.version, draft(consumed=["m1"]))
    assert await store.wait_inbox(actor, set(), 0.05) == []
    waiting = asyncio.ensure_future(store.wait_inbox(actor, {"m1"}, 30.0))
    await asyncio.sleep(0)  # let it begin (it returns the messages whether it began before they came or not)
    await store.enqueue(actor, message("m2"))
    await store.enqueue(actor, message("m3"))
    found = await waiting  # returns once a message is there
    assert [m.id for m in found][:1] == ["m2"]
    assert [m.id for m in await store.wait_inbox(actor, {"m1", "m2"}, 1.0)] == ["m3"]
    assert await store.wait_inbox(actor, {"m1", "m2", "m3"}, 0.05) == []  # nothing new: [] after the timeout
    assert await store.wait_inbox(ref("nobody"), set(), 0.05) == []


DEDUPE_WINDOW = Settings().dedupe_ttl_seconds  # every backend runs with the defaults
SNAPSHOT_EVERY = Settings().snapshot_every


@pytest.mark.parametrize("commits_after", [0, 20], ids=["idle-since", "a-ring-lap-later"])
async def test_an_id_is_a_duplicate_while_pending_and_for_the_window_after_its_consumption(
        backend: Backend, commits_after: int) -> None:
    """The decided rule (issue 27, docs/semantics.md): an id is a duplicate while its message is pending and for
    `Settings.dedupe_ttl_seconds` after the commit that consumed it, on the store's clock, once the actor has
    committed a snapshot since; after that the same id is a new message: stored, delivered again, and fingerprinted
    as the new one. An actor idle since the consumption holds the id until its next snapshot commit."""
    store, clock = backend.store, backend.clock
    actor = await created(store)
    first = message("again", {"delta": 1})
    assert await store.enqueue(actor, first)
    clock.advance(DEDUPE_WINDOW + 3600)  # pending for longer than the window: still a duplicate
    assert not await store.enqueue(actor, message("again", {"delta": 2}))
    version = await store.commit(actor, 1, draft(consumed=["again"], state={"value": 1}))
    consumed_at = clock.now()
    for n in range(commits_after):
        version = await store.commit(actor, version, draft(state={"value": n + 2}))
    clock.advance(DEDUPE_WINDOW - 600)  # inside the window
    assert not await store.enqueue(actor, message("again", {"delta": 3}))
    assert await store.message_fingerprint(actor, "again") == first.fingerprint()
    clock.advance(1200)  # the window has ended
    assert clock.now() > consumed_at + DEDUPE_WINDOW
    if commits_after == 0:  # but no snapshot was committed since the consumption: still held, on every store
        assert not await store.enqueue(actor, message("again", {"delta": 3}))
        assert await store.message_fingerprint(actor, "again") == first.fingerprint()
        for n in range(SNAPSHOT_EVERY - 1):  # version 2 consumed it; version 17 is the next snapshot
            assert await store.message_fingerprint(actor, "again") == first.fingerprint(), version
            version = await store.commit(actor, version, draft(state={"value": n + 2}))
    assert await store.message_fingerprint(actor, "again") is None
    second = message("again", {"delta": 4})
    assert await store.enqueue(actor, second)  # a new message
    assert await store.message_fingerprint(actor, "again") == second.fingerprint()
    snapshot = await store.load(actor)
    assert snapshot is not None and [(m.id, m.body) for m in snapshot.inbox] == [("again", {"delta": 4})]
    assert await store.commit(actor, version, draft(consumed=["again"], state={"value": 4})) == version + 1
    assert not await store.enqueue(actor, message("again", {"delta": 5}))  # and a duplicate again, for a window
    snapshot = await store.load(actor)
    assert snapshot is not None and snapshot.inbox == []
