"""A load of a version this store committed or read last reads two ring slots instead of the whole ring
(dormant.dynamodb.log `CommitLog._newest`, ring `confirms`; docs/storage.md, "Loads"): what it reads, what it costs,
and that it never returns a version another process superseded, deleted or re-created, on each server."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any, cast

import pytest

from dormant.aws.metering import Meter, instrument
from dormant.dynamodb.items import Head
from dormant.dynamodb.keys import item_key, message_id_of, ring_key
from dormant.dynamodb.messages import InboxItems
from dormant.dynamodb.ring import confirms, warm_candidate
from dormant.dynamodb.store import DynamoEventStore
from dormant.errors import StorageError, VersionConflict
from dormant.ports import ActorRef
from dormant.workflow.history import WorkflowRecord
from tests.contract.support import created, draft, message, meta
from tests.integration.test_aws_store import comparable, loop_iteration


class RingReads:
    """The key condition of every Query a client makes (botocore's `provide-client-params` hook)."""

    def __init__(self, client: Any) -> None:
        self.conditions: list[str] = []
        client.meta.events.register("provide-client-params.dynamodb.Query", self.hook)

    def hook(self, params: dict[str, Any], **_: Any) -> None:
        if "IndexName" not in params:  # (the inbox's Query reads the `pending` index)
            self.conditions.append(params["KeyConditionExpression"])

    def kinds(self) -> list[str]:
        kinds = ["pair" if "BETWEEN" in c else "ring" if "begins_with" in c else c for c in self.conditions]
        self.conditions.clear()
        return kinds


def stand_in(version: int, ring: int, incarnation: str = "") -> Head:
    """A head with only what `warm_candidate` and `confirms` read."""
    return cast(Head, SimpleNamespace(version=version, ring=ring, incarnation=incarnation))


async def advance(store: DynamoEventStore, actor: ActorRef, version: int, to: int) -> int:
    """Commit versions `version + 1` .. `to` through `store` (a state change each)."""
    for v in range(version, to):
        assert await store.commit(actor, v, draft(state={"value": v + 1})) == v + 1
    return to


async def fresh_load(store: DynamoEventStore, actor: ActorRef) -> dict[str, Any]:
    """What a process that never saw the actor loads (the whole ring)."""
    return comparable(await DynamoEventStore(store.client, store.settings).load(actor))


async def test_a_wrapped_actor_loads_from_two_slots_and_costs_one_read_unit_instead_of_the_ring(
        store: DynamoEventStore) -> None:
    actor = await created(store)
    ring = store.settings.snapshot_every
    reads = RingReads(store.client)
    for n in range(3 * ring + 4):  # a queue loop's iterations (~1 KB commits), wrapped, not at a lap's end
        assert await store.commit(actor, n + 1, loop_iteration(n)) == n + 2
        if n == ring - 3:  # in the first lap, every load reads the whole ring
            assert (await store.load(actor)) is not None and reads.kinds() == ["ring"]
    await store.enqueue(actor, message("waiting"))
    meter = Meter()
    instrument(store.client, always=meter)
    before = meter.copy()
    warm = await store.load(actor)
    warm_units = (meter - before).read_units
    assert reads.kinds() == ["pair"]
    assert comparable(warm) == await fresh_load(store, actor)  # (a cold process: the whole ring)
    assert comparable(warm)["inbox"] == ["waiting"]
    cold_units = (meter - before).read_units - warm_units
    assert reads.kinds() == ["ring"]
    # The pair's 2 items and the inbox: a read unit each; the ring's 16 items (about 8 KB: 2 units) and the inbox.
    assert (warm_units, cold_units) == (2, 3)


async def test_at_a_laps_end_and_in_the_first_lap_the_whole_ring_is_read() -> None:
    def head(version: int, ring: int = 16) -> Head:
        return stand_in(version, ring)

    assert [v for v in range(1, 50) if warm_candidate(head(v))] == [
        v for v in range(16, 50) if v not in (16, 32, 48)]  # (v % 16 == 0: the next slot is slot 0)
    assert not warm_candidate(head(3, ring=4)) and warm_candidate(head(5, ring=4))


def slot(version: int, incarnation: str = "i1", ring: int = 16, **extra: Any) -> dict[str, Any]:
    return {"sk": {"S": ring_key(version, ring)}, "v": {"N": str(version)}, "c": {"S": incarnation}, **extra}


@pytest.mark.parametrize(("pair", "confirmed"), [
    ([slot(20), slot(5)], True),  # its own version, and the next slot one lap behind the next version
    ([slot(5), slot(20)], True),  # (in either order)
    ([slot(20), slot(21)], False),  # a later version was committed
    ([slot(20), slot(37)], False),  # ... a lap later
    ([slot(20)], False),  # the next slot deleted (a deletion under way)
    ([slot(5)], False),  # its own slot deleted
    ([slot(20, gone={"BOOL": True}), slot(5)], False),  # (a marker can only be the next version; never trusted)
    ([slot(20), slot(5, incarnation="i0")], False),  # another life's item: a late commit of a deleted actor
    ([slot(20, incarnation="i2"), slot(5, incarnation="i2")], False),  # the actor was deleted and re-created
    ([slot(4), slot(5)], False),  # its own slot holds an older version (never: versions only grow; not trusted)
])
def test_what_two_slots_confirm(pair: list[dict[str, Any]], confirmed: bool) -> None:
    head = stand_in(20, 16, "i1")
    assert confirms(pair, head) is confirmed


async def test_another_process_commits_the_load_reads_the_ring_and_then_reads_it_at_once_until_it_stays(
        store: DynamoEventStore) -> None:
    actor = await created(store)
    ring = store.settings.snapshot_every
    version = await advance(store, actor, 1, ring + 2)
    other = DynamoEventStore(store.client, store.settings)
    reads = RingReads(store.client)
    assert (await other.load(actor)) is not None
    version = await advance(other, actor, version, version + 3)  # another process's wake-ups
    reads.kinds()
    loaded = await store.load(actor)
    assert loaded is not None and loaded.version == version
    assert reads.kinds() == ["pair", "ring"]  # confirmation failed: the ring, one request more (once)
    assert comparable(loaded) == await fresh_load(store, actor)
    reads.kinds()
    version = await advance(other, actor, version, version + 1)
    assert (await store.load(actor)).version == version  # type: ignore[union-attr]
    assert reads.kinds() == ["ring"]  # it moves between processes: the ring at once, no request more
    assert (await store.load(actor)).version == version  # type: ignore[union-attr]
    assert reads.kinds() == ["ring"]  # the ring found this store's version newest: it stays here now
    version = await advance(store, actor, version, version + 1)
    assert (await store.load(actor)).version == version  # type: ignore[union-attr]
    assert reads.kinds() == ["pair"]
    with pytest.raises(VersionConflict):  # the other process's cached version is stale: its commit loses
        await other.commit(actor, version - 1, draft(state={"value": -1}))


async def test_a_cached_version_of_a_deleted_or_re_created_actor_is_never_loaded(store: DynamoEventStore) -> None:
    actor = await created(store)
    ring = store.settings.snapshot_every
    await advance(store, actor, 1, ring + 3)
    other = DynamoEventStore(store.client, store.settings)
    assert await other.delete(actor)
    assert await store.load(actor) is None
    assert await other.create(actor, meta(), {"value": 0}, WorkflowRecord(), [])  # a new life
    assert await advance(other, actor, 1, ring + 3) == ring + 3  # at the very version the first store cached
    loaded = await store.load(actor)
    assert loaded is not None and comparable(loaded) == await fresh_load(store, actor)
    assert loaded.state == {"value": ring + 3}


async def test_a_deletion_interrupted_after_removing_the_marker_slot_is_seen(store: DynamoEventStore,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    actor = await created(store)
    ring = store.settings.snapshot_every
    version = await advance(store, actor, 1, ring + 3)
    assert (await store.load(actor)) is not None  # cached: the next load would read two slots

    async def remove_the_marker_slot_and_die(deletion: Any, ref: ActorRef) -> None:
        # Step 3 deletes items in pages in no set order: here the marker's slot (the next version's) first.
        await store.client.delete_item(TableName=store.table, Key=item_key(ref.id, ring_key(version + 1, ring)))
        raise StorageError("the deleting process died")

    monkeypatch.setattr("dormant.dynamodb.deletion.Deletion._delete_all_but_slot_zero", remove_the_marker_slot_and_die)
    with pytest.raises(StorageError):
        await DynamoEventStore(store.client, store.settings).delete(actor)
    monkeypatch.undo()
    assert await store.load(actor) is None  # the slot missing: not confirmed; the ring's slot 0 holds the marker


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_loads_by_two_processes_in_any_interleaving_equal_a_fresh_processs(store: DynamoEventStore,
                                                                                 seed: int) -> None:
    """Two processes commit an actor in a random interleaving (a stale one loses its condition, as in production),
    and each of their loads equals a cold process's, across laps, snapshots and lap ends."""
    chance = random.Random(seed)
    actor = await created(store)
    processes = [store, DynamoEventStore(store.client, store.settings)]
    known = {0: 1, 1: 1}
    for step in range(70):
        who = 0 if chance.random() < 0.7 else 1  # mostly one process: both paths are taken
        process = processes[who]
        if chance.random() < 0.5:
            snapshot = await process.load(actor)
            assert snapshot is not None and comparable(snapshot) == await fresh_load(store, actor), step
            known[who] = snapshot.version
        if chance.random() < 0.2:
            await process.enqueue(actor, message(f"m{step}"))
        try:
            known[who] = await process.commit(actor, known[who], draft(state={"value": step}))
        except VersionConflict:
            snapshot = await process.load(actor)
            assert snapshot is not None
            known[who] = snapshot.version


class IndexAnswers:
    """What each Query of the `pending` index returned: (items sent, items read) (botocore's hooks)."""

    def __init__(self, client: Any) -> None:
        self.answers: list[tuple[int, int]] = []
        client.meta.events.register("before-parameter-build.dynamodb.Query", self.asked)
        client.meta.events.register("after-call.dynamodb.Query", self.answered)

    def asked(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["index query"] = "IndexName" in params

    def answered(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if context.get("index query"):
            self.answers.append((parsed["Count"], parsed["ScannedCount"]))


async def test_a_warm_loads_inbox_query_leaves_out_what_its_version_consumed(store: DynamoEventStore) -> None:
    actor = await created(store)
    ring = store.settings.snapshot_every
    for n in range(ring + 6):  # past a lap: the snapshot (version 17) and the 6 commits since consumed 7 messages
        await store.enqueue(actor, message(f"m{n}"))
        assert await store.commit(actor, n + 1, loop_iteration(n)) == n + 2
    await store.enqueue(actor, message("waiting"))
    answers = IndexAnswers(store.client)
    warm = await store.load(actor)
    assert answers.answers == [(1, 8)]  # read: the 7 consumed (not tombstoned yet) and the waiting one; sent: 1
    cold = DynamoEventStore(store.client, store.settings)
    cold_load = await cold.load(actor)
    assert answers.answers[1:] == [(8, 8)]  # a cold load knows nothing consumed before it reads: all of them
    assert comparable(warm) == comparable(cold_load)
    assert warm is not None and cold_load is not None and warm.held_ids == cold_load.held_ids
    assert [m.id for m in warm.inbox] == ["waiting"]
    for consumed in ("m20", "m0"):  # consumed since the snapshot, and before it: a duplicate either way
        assert not await store.enqueue(actor, message(consumed))


async def test_only_ids_whose_dedupe_window_is_open_are_left_out(store: DynamoEventStore) -> None:
    now = [1_000_000.0]
    items = InboxItems(store.requests, clock=lambda: now[0], dedupe_ttl_seconds=60)
    actor = await created(store)
    for mid in ("a", "b", "c"):
        await store.enqueue(actor, message(mid))
    pending = await items.pending(actor, {"a": now[0] - 30, "b": now[0] - 61})  # a's window is open, b's ended
    assert pending.skipped == {"a"}
    assert sorted(message_id_of(item["sk"]["S"]) for item in pending.messages) == ["b", "c"]


async def test_more_consumed_messages_than_a_filter_takes_are_still_hidden(store: DynamoEventStore) -> None:
    """A filter names at most 99 ids (DynamoDB takes 100 operands of IN): past that, the rest are read and hidden by the
    load as before. On DynamoDB Local, AWS's own: the 99-operand filter is accepted."""
    actor = await created(store)
    ring = store.settings.snapshot_every
    version = await advance(store, actor, 1, ring + 2)  # wrapped; the next commit is no snapshot
    batch = [f"b{n}" for n in range(130)]
    for mid in [*batch, "waiting"]:
        assert await store.enqueue(actor, message(mid))
    assert (await store.load(actor)) is not None
    assert await store.commit(actor, version, draft(consumed=batch, state={"value": -1})) == version + 1
    answers = IndexAnswers(store.client)
    warm = await store.load(actor)
    assert answers.answers == [(1 + 130 - 99, 131)]  # 99 left out by the filter; 31 consumed still sent, and hidden
    assert warm is not None and [m.id for m in warm.inbox] == ["waiting"]
    assert warm.held_ids == {*batch, "waiting"}
    assert comparable(warm) == await fresh_load(store, actor)
