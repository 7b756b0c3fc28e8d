"""The EventStore contract, checked the same way on MemoryEventStore (the reference) and on the DynamoDB
store over DynamoDB Local, a moto server, dynalite and LocalStack: the stores provably agree."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dormant.core.callbacks import CALLBACK_RETENTION
from dormant.dynamodb.store import DynamoEventStore
from dormant.errors import VersionConflict
from dormant.memory.store import MemoryEventStore
from dormant.ports import ActorMeta, ActorRef, EventStore, InboxMessage, WakeError
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import CallbackChange, WorkflowRecord, WorkflowState
from tests.integration.conftest import server_for, shared_session, store_settings
from tests.localstack import ON_LOCALSTACK

T0 = 1_767_225_600.0


@pytest.fixture(params=["memory", "dynamodb_local", "dynamodb_local-threads", "moto", "dynalite",
                        pytest.param("localstack", marks=ON_LOCALSTACK)])
async def any_store(request: pytest.FixtureRequest) -> AsyncIterator[EventStore]:
    """Each store; `dynamodb_local-threads` is the DynamoDB store on botocore's client in threads (what the Lambda
    functions run, dormant.aws.clients) rather than aiobotocore's; `localstack` is DynamoDB Local behind
    LocalStack's gateway."""
    if request.param == "memory":
        yield MemoryEventStore()
        return
    server_name, _, kind = request.param.partition("-")
    server = server_for(request, server_name)
    settings = store_settings(server.endpoint, aws_clients=kind or "aiobotocore")
    async with DynamoEventStore.connect(settings, session=None if kind else shared_session()) as store:
        await store.create_table()
        yield store
    server.reset()


def ref(key: str = "a") -> ActorRef:
    return ActorRef(name="counter", key=(key, "x/y"))  # a key part with a slash: ids are percent-encoded


def meta(key: str = "a", actor_input: Any = None) -> ActorMeta:
    return ActorMeta(name="counter", key=(key, "x/y"), created_at=T0, input=actor_input)


def entry(location: str, seq: int, output: Any = None, kind: str = "step") -> dict[str, Any]:
    return {"location": location, "kind": kind, "name": location.rsplit("/", 1)[-1], "seq": seq,
            "status": "completed", "output": output}


def draft(*, upserts: list[dict[str, Any]] | None = None, deleted: list[str] | None = None,
          state: dict[str, Any] | None = None, consumed: list[str] | None = None,
          responses: dict[str, Any] | None = None, events: list[tuple[str, Any]] | None = None,
          workflow: WorkflowRecord | None = None, at: float = T0 + 1) -> CommitDraft:
    return CommitDraft(upserts=upserts or [], deleted_prefixes=deleted or [], state=state,
                       consumed_ids=consumed or [], responses=responses or {}, events=events or [],
                       workflow=workflow, committed_at=at)


def message(mid: str, body: Any = None, **extra: Any) -> InboxMessage:
    return InboxMessage(id=mid, queue="counter", body=body if body is not None else {"delta": 1},
                        created_at=T0, **extra)


async def created(store: EventStore, key: str = "a", state: dict[str, Any] | None = None) -> ActorRef:
    actor = ref(key)
    assert await store.create(actor, meta(key), state or {"value": 0}, WorkflowRecord(), [])
    return actor


async def test_create_exists_load_round_trip(any_store: EventStore) -> None:
    actor = ref()
    assert not await any_store.exists(actor)
    assert await any_store.load(actor) is None
    assert await any_store.create(actor, meta(actor_input={"n": [1, 2]}), {"value": 3},
                                  WorkflowRecord(state=WorkflowState.PENDING), [("created", {"by": "test"})])
    assert await any_store.exists(actor)
    assert not await any_store.create(actor, meta(), {"value": 99}, WorkflowRecord(), [])  # exists: no change
    snapshot = await any_store.load(actor)
    assert snapshot is not None
    assert (snapshot.version, snapshot.state, snapshot.history, snapshot.inbox) == (1, {"value": 3}, [], [])
    assert snapshot.meta == meta(actor_input={"n": [1, 2]})
    assert snapshot.workflow == WorkflowRecord()
    assert snapshot.wake_error is None
    events = await any_store.read_events(actor, 0, 10)
    assert [(e.seq, e.name, e.payload, e.at) for e in events] == [(1, "created", {"by": "test"}, T0)]
    assert not await any_store.exists(ref("other"))


async def test_commit_round_trip_and_prefix_deletion(any_store: EventStore) -> None:
    actor = await created(any_store)
    loop = entry("loop", 1, kind="loop")
    v2 = await any_store.commit(actor, 1, draft(
        upserts=[loop, entry("loop/~1/apply", 2, 1), entry("loop/~10/apply", 3, 10), entry("other", 4, "x")],
        state={"value": 1}, workflow=WorkflowRecord(state=WorkflowState.SLEEPING, waiting_for=["counter"])))
    assert v2 == 2
    v3 = await any_store.commit(actor, 2, draft(deleted=["loop/~1"], upserts=[entry("loop/~11/apply", 5, 11)]))
    assert v3 == 3
    snapshot = await any_store.load(actor)
    assert snapshot is not None
    assert snapshot.version == 3
    assert snapshot.state == {"value": 1}  # unchanged by a commit with state=None
    assert snapshot.workflow.state is WorkflowState.SLEEPING and snapshot.workflow.waiting_for == ["counter"]
    by_location = {e.location: e for e in snapshot.history}
    # "loop/~1" goes with everything under it, but not its sibling "loop/~10"
    assert sorted(by_location) == ["loop", "loop/~10/apply", "loop/~11/apply", "other"]
    assert by_location["loop/~10/apply"].output == 10 and by_location["other"].output == "x"


async def test_commit_conflicts(any_store: EventStore) -> None:
    with pytest.raises(VersionConflict):
        await any_store.commit(ref("ghost"), 1, draft(state={"value": 1}))
    actor = await created(any_store)
    assert await any_store.commit(actor, 1, draft(state={"value": 1})) == 2
    with pytest.raises(VersionConflict):
        await any_store.commit(actor, 1, draft(state={"value": 2}))  # same expected version: loses
    with pytest.raises(VersionConflict):
        await any_store.commit(actor, 5, draft(state={"value": 2}))  # from the future
    snapshot = await any_store.load(actor)
    assert snapshot is not None and (snapshot.version, snapshot.state) == (2, {"value": 1})


async def test_twenty_concurrent_commits_exactly_one_wins(any_store: EventStore) -> None:
    actor = await created(any_store)
    await any_store.load(actor)

    async def attempt(n: int) -> int | None:
        try:
            return await any_store.commit(actor, 1, draft(state={"value": n}, consumed=[], events=[("won", n)]))
        except VersionConflict:
            return None

    results = await asyncio.gather(*(attempt(n) for n in range(20)))
    winners = [n for n, version in enumerate(results) if version is not None]
    assert len(winners) == 1 and results[winners[0]] == 2
    snapshot = await any_store.load(actor)
    assert snapshot is not None and (snapshot.version, snapshot.state) == (2, {"value": winners[0]})
    assert [(e.seq, e.payload) for e in await any_store.read_events(actor, 0, 10)] == [(1, winners[0])]


async def test_enqueue_is_idempotent_before_creation_and_after_consumption(any_store: EventStore) -> None:
    actor = ref()
    assert await any_store.enqueue(actor, message("m1", {"delta": 1}))  # before the actor exists
    assert not await any_store.enqueue(actor, message("m1", {"delta": 100}))  # a duplicate changes nothing
    await created(any_store)
    assert not await any_store.enqueue(actor, message("m1", {"delta": 100}))
    assert await any_store.enqueue(actor, message("m2", {"delta": 2}))
    snapshot = await any_store.load(actor)
    assert snapshot is not None
    assert [(m.id, m.body) for m in snapshot.inbox] == [("m1", {"delta": 1}), ("m2", {"delta": 2})]
    await any_store.commit(actor, 1, draft(consumed=["m1"], state={"value": 1}))
    assert not await any_store.enqueue(actor, message("m1", {"delta": 1000}))  # consumed: still a duplicate
    snapshot = await any_store.load(actor)
    assert snapshot is not None and [m.id for m in snapshot.inbox] == ["m2"]
    await any_store.commit(actor, 2, draft(consumed=["m2"]))
    assert not await any_store.enqueue(actor, message("m2"))
    assert not await any_store.enqueue(actor, message("m1"))
    snapshot = await any_store.load(actor)
    assert snapshot is not None and snapshot.inbox == []


async def test_inbox_keeps_send_order(any_store: EventStore) -> None:
    actor = ref()
    ids = [f"msg-{n:02d}-{'zyxwvutsrq'[n % 10]}" for n in range(12)]  # ids not in alphabetical send order
    for mid in ids[:4]:
        await any_store.enqueue(actor, message(mid))
    await created(any_store)
    for mid in ids[4:]:
        await any_store.enqueue(actor, message(mid))
    await any_store.enqueue(actor, message(ids[0]))  # a duplicate does not move the original
    snapshot = await any_store.load(actor)
    assert snapshot is not None and [m.id for m in snapshot.inbox] == ids
    await any_store.commit(actor, 1, draft(consumed=[ids[5], ids[1]]))
    snapshot = await any_store.load(actor)
    assert snapshot is not None and [m.id for m in snapshot.inbox] == [i for i in ids if i not in (ids[1], ids[5])]


async def test_scheduled_action_messages_round_trip(any_store: EventStore) -> None:
    actor = await created(any_store)
    scheduled = InboxMessage(id="s1", queue="reset", kind="action", args=[1, {"a": "b"}], created_at=T0,
                             not_before=T0 + 60)
    assert await any_store.enqueue(actor, scheduled)
    snapshot = await any_store.load(actor)
    assert snapshot is not None and snapshot.inbox == [scheduled]


async def test_responses_visible_after_the_commit(any_store: EventStore) -> None:
    actor = await created(any_store)
    await any_store.enqueue(actor, message("ask"))
    assert await any_store.wait_response(actor, "ask", 0.05) == (False, None)
    waiter = asyncio.ensure_future(any_store.wait_response(actor, "ask", 10.0))
    await asyncio.sleep(0.05)
    await any_store.commit(actor, 1, draft(consumed=["ask"], responses={"ask": {"answer": [42, "x"]}}))
    assert await waiter == (True, {"answer": [42, "x"]})
    assert await any_store.wait_response(actor, "ask", 0.0) == (True, {"answer": [42, "x"]})
    assert await any_store.wait_response(actor, "never-sent", 0.05) == (False, None)


async def test_events_in_order_with_cursor_and_limit(any_store: EventStore) -> None:
    actor = ref()
    assert await any_store.create(actor, meta(), {}, WorkflowRecord(), [("e", 1), ("e", 2)])
    assert await any_store.wait_events(actor, 2, 0.05) == []
    waiter = asyncio.ensure_future(any_store.wait_events(actor, 2, 10.0))
    await asyncio.sleep(0.05)
    await any_store.commit(actor, 1, draft(events=[("e", 3), ("f", {"k": 4}), ("e", 5)], at=T0 + 7))
    assert [(e.seq, e.name, e.payload, e.at) for e in await waiter] == [
        (3, "e", 3, T0 + 7), (4, "f", {"k": 4}, T0 + 7), (5, "e", 5, T0 + 7)]
    await any_store.commit(actor, 2, draft(state={"x": 1}))  # no events
    await any_store.commit(actor, 3, draft(events=[("e", 6)]))
    everything = await any_store.read_events(actor, 0, 100)
    assert [e.seq for e in everything] == [1, 2, 3, 4, 5, 6] and [e.payload for e in everything][-1] == 6
    assert [e.seq for e in await any_store.read_events(actor, 3, 2)] == [4, 5]  # mid-commit cursor, limit
    assert [e.seq for e in await any_store.read_events(actor, 6, 10)] == []
    assert await any_store.read_events(ref("nobody"), 0, 10) == []


async def test_wake_error_is_recorded_on_existing_actors_only(any_store: EventStore) -> None:
    await any_store.record_wake_error(ref("ghost"), WakeError(message="boom", at=T0))
    assert not await any_store.exists(ref("ghost"))
    actor = await created(any_store)
    await any_store.record_wake_error(actor, WakeError(message="first", at=T0, receive_count=1, version=1))
    await any_store.record_wake_error(actor, WakeError(message="poison", at=T0 + 1, receive_count=5, version=1))
    await any_store.enqueue(actor, message("after-error"))
    snapshot = await any_store.load(actor)
    assert snapshot is not None
    assert snapshot.wake_error == WakeError(message="poison", at=T0 + 1, receive_count=5, version=1)
    assert [m.id for m in snapshot.inbox] == ["after-error"]


async def test_fingerprints_identify_a_message_id_pending_and_after_consumption(any_store: EventStore) -> None:
    actor = await created(any_store)
    first = message("k1", {"delta": 1})
    assert await any_store.enqueue(actor, first)
    assert await any_store.message_fingerprint(actor, "k1") == first.fingerprint()
    assert await any_store.message_fingerprint(actor, "unknown") is None
    assert message("k1", {"delta": 1}).fingerprint() == first.fingerprint()  # times are not part of it
    assert message("k1", {"delta": 2}).fingerprint() != first.fingerprint()
    snapshot = await any_store.load(actor)
    assert snapshot is not None and snapshot.held_ids >= {"k1"}
    # Consumed, then through a whole ring of commits (the tombstone is written before the next snapshot):
    version = await any_store.commit(actor, 1, draft(consumed=["k1"], state={"value": 1}))
    for n in range(20):
        version = await any_store.commit(actor, version, draft(state={"value": n + 2}))
    assert await any_store.message_fingerprint(actor, "k1") == first.fingerprint()
    assert not await any_store.enqueue(actor, message("k1", {"delta": 2}))  # still a duplicate id
    loaded = await any_store.load(actor)
    assert loaded is not None and loaded.inbox == []


async def test_a_load_shows_the_ids_it_holds_so_a_wake_up_stores_only_missing_ones(any_store: EventStore) -> None:
    actor = await created(any_store)
    for mid in ("a", "b"):
        assert await any_store.enqueue(actor, message(mid))
    await any_store.commit(actor, 1, draft(consumed=["a"]))
    snapshot = await any_store.load(actor)
    assert snapshot is not None
    assert [m.id for m in snapshot.inbox] == ["b"]
    assert {"a", "b"} <= snapshot.held_ids  # "a" is consumed but still known: nothing to store for it


async def test_wait_inbox_returns_messages_not_known_as_they_arrive(any_store: EventStore) -> None:
    actor = await created(any_store)
    await any_store.enqueue(actor, message("m1"))
    snapshot = await any_store.load(actor)
    assert snapshot is not None
    # Consumed by a commit, not yet tombstoned in the DynamoDB store: never returned as new.
    await any_store.commit(actor, snapshot.version, draft(consumed=["m1"]))
    assert await any_store.wait_inbox(actor, set(), 0.05) == []

    async def send_later() -> None:
        await asyncio.sleep(0.1)
        await any_store.enqueue(actor, message("m2"))
        await any_store.enqueue(actor, message("m3"))

    sender = asyncio.ensure_future(send_later())
    found = await any_store.wait_inbox(actor, {"m1"}, 10.0)  # returns once a message is there
    await sender
    assert [m.id for m in found][:1] == ["m2"]
    assert [m.id for m in await any_store.wait_inbox(actor, {"m1", "m2"}, 1.0)] == ["m3"]
    assert await any_store.wait_inbox(actor, {"m1", "m2", "m3"}, 0.05) == []  # nothing new: [] after the timeout


def callback_change(state: str, **fields: Any) -> CallbackChange:
    values: dict[str, Any] = {"token_hash": "f" * 64, "callback_id": "f" * 32, "name": "approval",
                              "location": "loop/~3/approval", "state": state, "deadline": T0 + 1000,
                              "heartbeat_timeout": 100.0, "heartbeat_deadline": T0 + 100, "at": T0 + 1}
    return CallbackChange(**{**values, **fields})


async def test_callback_records_open_once_close_once_and_heartbeats_only_move_forward(any_store: EventStore) -> None:
    actor = await created(any_store)
    assert await any_store.read_callback("f" * 64) is None
    version = await any_store.commit(actor, 1, CommitDraft(upserts=[], deleted_prefixes=[], state=None,
                                                           consumed_ids=[], responses={}, events=[], workflow=None,
                                                           committed_at=T0 + 1, callbacks=[callback_change("open")]))
    record = await any_store.read_callback("f" * 64)
    assert record is not None
    assert (record.ref, record.actor_created_at, record.state, record.version) == (actor, T0, "open", version)
    assert (record.name, record.location, record.deadline, record.heartbeat_deadline, record.expires_at) == (
        "approval", "loop/~3/approval", T0 + 1000, T0 + 100, T0 + 1000 + CALLBACK_RETENTION)
    assert await any_store.heartbeat_callback("f" * 64, T0 + 150, T0 + 50)
    assert await any_store.heartbeat_callback("f" * 64, T0 + 120, T0 + 60)  # an older heartbeat: stays at 150
    assert (await any_store.read_callback("f" * 64)).heartbeat_deadline == T0 + 150  # type: ignore[union-attr]
    # A commit writing the open record again (a re-settled version) never undoes a heartbeat.
    version = await any_store.commit(actor, version, CommitDraft(
        upserts=[], deleted_prefixes=[], state={"value": 1}, consumed_ids=[], responses={}, events=[],
        workflow=None, committed_at=T0 + 2, callbacks=[callback_change("open")]))
    assert (await any_store.read_callback("f" * 64)).heartbeat_deadline == T0 + 150  # type: ignore[union-attr]
    assert not await any_store.heartbeat_callback("f" * 64, T0 + 400, T0 + 150)  # missed: the deadline has passed
    assert not await any_store.heartbeat_callback("0" * 64, T0 + 400, T0 + 10)  # no such callback
    version = await any_store.commit(actor, version, CommitDraft(
        upserts=[], deleted_prefixes=[], state={"value": 2}, consumed_ids=[], responses={}, events=[], workflow=None,
        committed_at=T0 + 3, callbacks=[callback_change("completed", at=T0 + 3)]))
    closed = await any_store.read_callback("f" * 64)
    assert closed is not None and (closed.state, closed.version, closed.expires_at) == (
        "completed", version, T0 + 3 + CALLBACK_RETENTION)
    assert not await any_store.heartbeat_callback("f" * 64, T0 + 400, T0 + 4)  # closed: takes no heartbeats
    await any_store.commit(actor, version, CommitDraft(
        upserts=[], deleted_prefixes=[], state={"value": 3}, consumed_ids=[], responses={}, events=[], workflow=None,
        committed_at=T0 + 4, callbacks=[callback_change("open"), callback_change("timed_out", at=T0 + 4)]))
    assert (await any_store.read_callback("f" * 64)).state == "completed"  # type: ignore[union-attr]  # closed once
    assert await any_store.delete(actor)
    assert (await any_store.read_callback("f" * 64)) is not None  # outlives its actor (the API refuses it then)
