"""The DynamoDB event store on a moto server and on dynalite: request counts, the commit ring, the
400 KB limit, crash recovery between a commit and its derived items, and a workflow under the runtime."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import pytest
from pydantic import BaseModel

from dormant import StepContext, WorkflowContext, actor, event, queue, setup
from dormant.aws.metering import Meter, instrument
from dormant.client import Client
from dormant.dynamodb.store import ITEM_LIMIT, PENDING_INDEX, TTL_ATTRIBUTE, DynamoEventStore, table_definition
from dormant.errors import ItemTooLargeError, StorageError, StorageRefusedError, VersionConflict
from dormant.memory.store import MemoryEventStore
from dormant.memory.transport import MemoryTransport
from dormant.ports import ActorRef, ActorSnapshot
from dormant.runtime.clocks import SystemClock
from dormant.runtime.service import ActorService
from dormant.runtime.wake import wake_actor
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import WorkflowRecord, WorkflowState
from tests.contract.support import created, draft, entry, message, meta, ref
from tests.integration.conftest import watch


def loop_iteration(n: int) -> CommitDraft:
    """What one iteration of a queue loop commits: the message consumed, the loop entry, the iteration's
    step, the state, and the compaction of the iteration that left the 2-iteration window."""
    deleted = [f"loop/~{n - 3}"] if n >= 3 else []
    return draft(upserts=[{**entry("loop", 1, kind="loop"), "status": "pending", "iteration": n + 1},
                          entry(f"loop/~{n}/wait", 2 * n + 2, kind="message"), entry(f"loop/~{n}/apply", 2 * n + 3, n)],
                 deleted=deleted, state={"value": n, "processed": n + 1}, consumed=[f"m{n}"],
                 workflow=WorkflowRecord(state=WorkflowState.SLEEPING, waiting_for=["counter"]))


def comparable(snapshot: ActorSnapshot | None) -> dict[str, Any]:
    assert snapshot is not None
    return {"version": snapshot.version, "state": snapshot.state, "workflow": snapshot.workflow,
            "history": sorted((e.model_dump() for e in snapshot.history), key=lambda e: e["seq"]),
            "inbox": [m.id for m in snapshot.inbox]}


async def ring_items(store: DynamoEventStore, actor: ActorRef) -> int:
    response = await store.client.query(
        TableName=store.table, ConsistentRead=True, Select="COUNT", KeyConditionExpression="pk = :pk AND "
        "begins_with(sk, :c)", ExpressionAttributeValues={":pk": {"S": actor.id}, ":c": {"S": "c#"}})
    return int(response["Count"])


async def test_table_definition_and_ttl(store: DynamoEventStore, request: pytest.FixtureRequest) -> None:
    definition = table_definition("t-1")
    assert definition["BillingMode"] == "PAY_PER_REQUEST"
    assert [k["AttributeName"] for k in definition["KeySchema"]] == ["pk", "sk"]
    described = (await store.client.describe_table(TableName=store.table))["Table"]
    assert [i["IndexName"] for i in described["LocalSecondaryIndexes"]] == [PENDING_INDEX]
    ttl = (await store.client.describe_time_to_live(TableName=store.table))["TimeToLiveDescription"]
    if request.node.callspec.params["store"] != "dynalite":
        assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", TTL_ATTRIBUTE)
    else:  # dynalite has no UpdateTimeToLive: expired items are filtered on read instead
        assert ttl["TimeToLiveStatus"] == "DISABLED"


async def test_300_loop_iterations_load_with_one_query_page(store: DynamoEventStore) -> None:
    reference = MemoryEventStore()
    actor = ref()
    for target in (store, reference):
        assert await target.create(actor, meta(), {"value": 0, "processed": 0}, WorkflowRecord(), [])
    log = watch(store.client)
    meter = Meter()
    instrument(store.client, always=meter)
    sent = range(0, 300, 20)  # a sample of the messages is really sent (consuming the others is harmless)
    for n in sent:
        await reference.enqueue(actor, message(f"m{n}"))
    assert all(await asyncio.gather(*(store.enqueue(actor, message(f"m{n}")) for n in sent)))
    ring = store.settings.snapshot_every
    for n in range(300):
        log.clear()
        before = meter.copy()
        for target in (store, reference):
            assert await target.commit(actor, n + 1, loop_iteration(n)) == n + 2
        if n == 0:  # pending -> sleeping: the one commit that changes the listed status writes its status item
            assert log.counts() == {"PutItem": 2}
        elif (n + 2 - 1) % ring:  # one conditional PutItem of a ~1 KB delta (the status is unchanged)
            assert log.counts() == {"PutItem": 1}
            assert (meter - before).write_units == 1
        else:  # every 16th is a snapshot, after one batch of tombstones for the 16 messages consumed since
            # (This test consumes ids it never enqueued, so the tombstones' fingerprints are looked up once;
            # a wake-up's own load has seen them: test_tombstones_keep_fingerprints_without_extra_reads.)
            assert log.counts() == {"BatchGetItem": 1, "BatchWriteItem": 1, "PutItem": 1}
    assert await ring_items(store, actor) == ring  # storage of commits is bounded by the ring

    for reader in (store, DynamoEventStore(store.client, store.settings)):  # warm cache, then a cold process
        log.clear()
        before = meter.copy()
        loaded = await reader.load(actor)
        assert log.counts() == {"Query": 2}  # the ring (history + state) and the pending index (inbox)
        assert comparable(loaded) == comparable(await reference.load(actor))
        read = meter - before
        assert read.read_units <= 8
    assert loaded is not None and [e.location for e in sorted(loaded.history, key=lambda e: e.seq)] == [
        "loop", "loop/~297/wait", "loop/~297/apply", "loop/~298/wait", "loop/~298/apply", "loop/~299/wait",
        "loop/~299/apply"]
    assert not await store.enqueue(actor, message("m0"))  # consumed 300 commits ago: still a duplicate


async def test_stale_writer_loses_after_the_ring_wrapped(store: DynamoEventStore) -> None:
    actor = await created(store)
    slow = DynamoEventStore(store.client, store.settings)  # another process that read version 1 long ago
    assert (await slow.load(actor)) is not None
    ring = store.settings.snapshot_every
    for version in range(1, 2 * ring + 2):
        await store.commit(actor, version, draft(state={"value": version}))
    # version 1 + ring + ... : the slot version 2 would use now holds a later version
    with pytest.raises(VersionConflict):
        await slow.commit(actor, 1, draft(state={"value": -1}))
    snapshot = await store.load(actor)
    assert snapshot is not None and (snapshot.version, snapshot.state) == (2 * ring + 2, {"value": 2 * ring + 1})
    assert await store.exists(actor)  # slot 0 was overwritten by later versions, never emptied


async def test_concurrent_commits_from_two_processes(store: DynamoEventStore) -> None:
    actor = await created(store)
    other = DynamoEventStore(store.client, store.settings)
    for version in range(1, 21):  # 20 rounds of a race between two independent stores
        await asyncio.gather(store.load(actor), other.load(actor))
        results = await asyncio.gather(
            store.commit(actor, version, draft(state={"by": "a", "round": version})),
            other.commit(actor, version, draft(state={"by": "b", "round": version})), return_exceptions=True)
        assert sorted(type(r).__name__ for r in results) == ["VersionConflict", "int"]
    snapshot = await other.load(actor)
    assert snapshot is not None and snapshot.version == 21 and snapshot.state["round"] == 20


async def test_item_over_400_kb_is_refused_naming_limit_actor_and_entry(store: DynamoEventStore) -> None:
    actor = await created(store)
    log = watch(store.client)
    huge = "x" * (ITEM_LIMIT + 10)
    with pytest.raises(ItemTooLargeError) as refused:
        await store.commit(actor, 1, draft(upserts=[entry("fetch", 1, "small"), entry("big-step", 2, huge)]))
    text = str(refused.value)
    # the actor's type (not its key: errors reach clients, and never repeat what they sent) and the entry
    assert "at most 400,000 bytes" in text and f"type {actor.name!r}" in text and "'big-step'" in text
    assert "PutItem" not in log.calls  # refused before sending: nothing to retry
    # the live history may not outgrow one item either: two 250 KB outputs in two commits
    half = "y" * 250_000
    assert await store.commit(actor, 1, draft(upserts=[entry("first", 1, half)])) == 2
    with pytest.raises(ItemTooLargeError, match=r"live history and state of version 3 .* entry 'second'"):
        await store.commit(actor, 2, draft(upserts=[entry("second", 2, half + "z")]))
    with pytest.raises(ItemTooLargeError, match=r"the message .* 200,000 bytes .* of its 2 parts is the message"):
        await store.enqueue(actor, message("fat", {"blob": huge}))
    snapshot = await store.load(actor)
    assert snapshot is not None and snapshot.version == 2 and [e.location for e in snapshot.history] == ["first"]
    assert snapshot.inbox == []


async def test_server_refusal_of_a_large_item_is_not_retried(store: DynamoEventStore) -> None:
    actor = await created(store)
    store.item_limit = 10 * ITEM_LIMIT  # skip the store's own check: the server must refuse it
    log = watch(store.client)
    with pytest.raises(StorageRefusedError, match="ValidationException"):
        # Random hex: commit payloads are compressed, so the output must not compress below the limit.
        await store.commit(actor, 1, draft(upserts=[entry("big-step", 1, secrets.token_hex(ITEM_LIMIT))]))
    assert log.counts()["PutItem"] == 1  # botocore does not retry a ValidationException
    snapshot = await store.load(actor)
    assert snapshot is not None and snapshot.version == 1


async def test_crash_between_commit_and_derived_items_loses_nothing(store: DynamoEventStore,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    actor = await created(store)
    await store.enqueue(actor, message("ask"))
    await store.enqueue(actor, message("other"))
    await store.load(actor)

    async def crash(items: list[dict[str, Any]]) -> None:
        raise StorageError("the worker died right after its commit")

    monkeypatch.setattr(store.requests, "put_all", crash)  # the derived items' write
    with pytest.raises(StorageError):
        await store.commit(actor, 1, draft(consumed=["ask"], responses={"ask": {"ok": 1}}, events=[("done", 1)],
                                           state={"value": 1}))
    monkeypatch.undo()
    # Nothing derived was written: the answer is not readable yet, the pending item still exists...
    reader = DynamoEventStore(store.client, store.settings, settle_on_load=False)
    assert await reader.wait_response(actor, "ask", 0.0) == (False, None)
    assert await reader.read_events(actor, 0, 10) == []
    # ...but the commit is durable and its consumed message is never delivered again
    snapshot = await reader.load(actor)
    assert snapshot is not None and snapshot.version == 2 and [m.id for m in snapshot.inbox] == ["other"]
    assert not await reader.enqueue(actor, message("ask"))
    # The next process to load it (a redelivered wake-up) writes what the crashed one did not.
    survivor = DynamoEventStore(store.client, store.settings)
    log = watch(store.client)
    snapshot = await survivor.load(actor)
    assert snapshot is not None and [m.id for m in snapshot.inbox] == ["other"]
    assert log.counts() == {"Query": 2, "BatchGetItem": 1, "BatchWriteItem": 1}
    assert await reader.wait_response(actor, "ask", 0.0) == (True, {"ok": 1})
    assert [(e.seq, e.name, e.payload) for e in await reader.read_events(actor, 0, 10)] == [(1, "done", 1)]
    log.clear()
    await DynamoEventStore(store.client, store.settings).load(actor)  # settled now: only a probe
    assert log.counts() == {"Query": 2, "BatchGetItem": 1}


async def test_next_commit_settles_what_a_crash_left(store: DynamoEventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    actor = await created(store)
    await store.enqueue(actor, message("ask"))
    await store.load(actor)
    async def crash(items: list[dict[str, Any]]) -> None:
        raise StorageError("lost")

    monkeypatch.setattr(store.requests, "put_all", crash)
    with pytest.raises(StorageError):
        await store.commit(actor, 1, draft(consumed=["ask"], responses={"ask": "yes"}))
    monkeypatch.undo()
    reader = DynamoEventStore(store.client, store.settings, settle_on_load=False)
    assert await reader.load(actor) is not None  # reads only: writes nothing
    assert await reader.wait_response(actor, "ask", 0.0) == (False, None)
    assert await reader.commit(actor, 2, draft(state={"value": 2})) == 3  # settles version 2 first
    assert await reader.wait_response(actor, "ask", 0.0) == (True, "yes")

    async def inbox_item() -> dict[str, Any]:
        found = await store.client.get_item(TableName=store.table, ConsistentRead=True,
                                            Key={"pk": {"S": actor.id}, "sk": {"S": "i#ask"}})
        return dict(found["Item"])

    assert "pq" in await inbox_item()  # consumed, hidden by the commits since the snapshot, not yet a tombstone
    version = 3
    while (version - 1) % store.settings.snapshot_every:  # up to the next snapshot commit
        version = await reader.commit(actor, version, draft(state={"value": version}))
    tombstone = await inbox_item()
    assert "pq" not in tombstone and float(tombstone[TTL_ATTRIBUTE]["N"]) > time.time() + 3600
    snapshot = await reader.load(actor)
    assert snapshot is not None and snapshot.inbox == [] and not await reader.enqueue(actor, message("ask"))


async def test_torn_ring_read_is_read_again(store: DynamoEventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    actor = await created(store)
    for version in range(1, 6):
        await store.commit(actor, version, draft(state={"value": version}))
    real = store.ring.items
    calls = 0

    async def torn(target: ActorRef) -> list[dict[str, Any]]:
        nonlocal calls
        calls += 1
        items = await real(target)
        if calls == 1:  # as if version 5 was overwritten mid-read: a gap below the newest version
            items = [item for item in items if item["v"]["N"] != "5"]
        return items

    fresh = DynamoEventStore(store.client, store.settings)  # no cached materialization to fall back on
    monkeypatch.setattr(fresh.ring, "items", torn)
    snapshot = await fresh.load(actor)
    assert calls == 2 and snapshot is not None and (snapshot.version, snapshot.state) == (6, {"value": 5})


# -- a workflow under the runtime, on the DynamoDB store ------------------------------------------------
class Tally(BaseModel):
    value: int = 0
    processed: int = 0


class Delta(BaseModel):
    delta: int


class Question(BaseModel):
    plus: int


class Answer(BaseModel):
    value: int


class Changed(BaseModel):
    value: int


tally = actor("tally", state=Tally, queues={"add": queue(Delta), "ask": queue(Question, response=Answer)},
              events={"changed": event(Changed)})


@tally.workflow
async def run_tally(ctx: WorkflowContext) -> None:
    await ctx.sleep("warm-up", 0.2)  # a real durable timer through the transport

    async def iteration(loop: WorkflowContext) -> None:
        msg = await loop.queue.next("wait", names=["add", "ask"], completable=True)

        def apply(s: StepContext) -> int:
            s.state.value += msg.body.delta if msg.name == "add" else msg.body.plus
            s.state.processed += 1
            s.broadcast("changed", {"value": s.state.value})
            return int(s.state.value)

        value = await loop.step("apply", apply)
        assert msg.complete is not None
        await msg.complete({"value": value} if msg.name == "ask" else None)

    await ctx.loop("tally-loop", iteration)


registry = setup(tally)


async def run_until_idle(service: ActorService, transport: MemoryTransport, limit: float = 20.0) -> None:
    """A real-clock runner: wake what is due, sleep until the next timer (only short ones), repeat."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        due = transport.pop_due(time.time())
        for actor_ref in due:
            await wake_actor(service, actor_ref)
        if due:
            continue
        upcoming = transport.next_time()
        if upcoming is None or upcoming > time.time() + 2:
            return
        await asyncio.sleep(max(0.0, upcoming - time.time()))
    raise TimeoutError("wake-ups still due")


async def test_workflow_end_to_end_on_the_store(store: DynamoEventStore) -> None:
    store = DynamoEventStore(store.client, store.settings.model_copy(update={"snapshot_every": 4}))  # small ring
    transport = MemoryTransport()
    service = ActorService(registry, store, transport, SystemClock())
    handle = Client(service).get_or_create("tally", ["main"])
    for delta in (1, 2, 3):
        assert (await handle.send("add", {"delta": delta})).status == "queued"
    await run_until_idle(service, transport)
    assert (await handle.state()).model_dump() == {"value": 6, "processed": 3}
    asked = asyncio.ensure_future(handle.send("ask", {"plus": 10}, wait=True, timeout=200))  # a deadline only

    def ask_is_due() -> bool:  # its wake-up is in (a timer still pending from before is not: it is not due yet)
        upcoming = transport.next_time()
        return upcoming is not None and upcoming <= time.time()

    deadline = time.monotonic() + 60
    while not ask_is_due():
        assert time.monotonic() < deadline and not asked.done(), "the waiting send never sent its wake-up"
        await asyncio.sleep(0.01)
    await run_until_idle(service, transport)
    answer = await asked
    assert (answer.status, answer.response) == ("completed", {"value": 16})
    for _ in range(12):  # enough iterations to wrap the commit ring of 4 several times
        await handle.send("add", {"delta": 1})
        await run_until_idle(service, transport)
    status = await handle.status()
    assert status.workflow is WorkflowState.SLEEPING and status.waiting_for.queues == ["add", "ask"]
    assert (await handle.state()).model_dump() == {"value": 28, "processed": 16}
    events = [e async for e in service.events(handle.ref, follow=False)]
    assert [e.payload["value"] for e in events] == [1, 3, 6, 16, *range(17, 29)]
    history = await handle.history()
    assert len(history) < 12  # compacted: the loop keeps a small window, not 16 iterations
    # a second process (cold cache) sees the same actor
    other = ActorService(registry, DynamoEventStore(store.client, store.settings), MemoryTransport(), SystemClock())
    assert (await other.state(handle.ref)).value == 28


async def test_tombstones_keep_fingerprints_without_extra_reads(store: DynamoEventStore) -> None:
    """As a wake-up does it: the load that hands out the messages also learns their fingerprints, so the
    snapshot commit's tombstones cost one BatchWriteItem (no BatchGetItem), and keep the fingerprints."""
    actor = await created(store)
    ring = store.settings.snapshot_every
    for n in range(ring):
        assert await store.enqueue(actor, message(f"m{n}", {"delta": n}))
    cold = DynamoEventStore(store.client, store.settings)  # another process: it learns them by loading
    snapshot = await cold.load(actor)
    assert snapshot is not None and len(snapshot.inbox) == ring
    log = watch(store.client)
    version = 1
    for n in range(ring):
        log.clear()
        version = await cold.commit(actor, version, draft(consumed=[f"m{n}"], state={"value": n}))
    assert log.counts() == {"BatchWriteItem": 1, "PutItem": 1}  # the snapshot commit after the lap
    for n in range(ring - 1):
        assert await store.message_fingerprint(actor, f"m{n}") == message(f"m{n}", {"delta": n}).fingerprint()
