"""A table as a release of the DynamoDB store wrote it, kept as data: the guard of the stored format (issue 29).

`write_actors` makes, through the store of the release that captures it, actors in every status with what their
partitions can hold — pending, consumed and tombstoned messages, responses and events, a lapped commit ring (kept
versions), values in S3, a callback's lookup item, a wake-up error and an attention mark, search items, a deletion
mark, flow-control slots and a waiter — plus examples/counter.py's actor as the runtime's worker left it
(`run_counter`), and `capture` saves every item of the table and every object of the bucket,
with what that release read back (`expected`: each actor's snapshot, the listing, the kept versions, the callback),
as one JSON file. tests/integration/test_stored_protocol.py loads the file into a fresh table and bucket and reads,
sends to, commits and deletes those actors with the code under test: a change of the stored format that forgets the
data already written fails there.

Regenerate (only when the format changes on purpose, keeping the old file as the migration's input):

    PYTHONPATH=$PWD/lib:$PWD .venv/bin/python -m tests.integration.stored_protocol tests/integration/data/NAME.json
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from dormant.core.slots import LimitRule, SlotLease, SlotRequest
from dormant.dynamodb.store import DynamoEventStore
from dormant.ports import ActorMeta, ActorRef, ActorSnapshot, InboxMessage, WakeError
from dormant.settings import Settings
from dormant.workflow.history import CallbackChange, WorkflowRecord, WorkflowState
from tests.contract.support import T0, attributes, draft, entry, loop_commits, make_order

# The store's clock, the same when the data is written and when it is read back: far enough ahead that no server
# that expires items by their TTL ever takes a tombstone of the file (their `expires_at` is a week after it).
STORE_NOW = 4_102_444_800.0  # 2100-01-01
OFFLOAD = 1024  # Settings.offload_threshold_bytes: values over 1 KB go to S3 (the least it takes: a small file)
BIG = "b" * 1500  # a value kept in S3
LIMIT = LimitRule(name="stripe", concurrency=2, window=1.0, per_window=None)
TOKEN_HASH = "c" * 64
STATUSES = ("pending", "sleeping", "running", "completed", "failed", "diverged", "paused", "rolling_back",
            "terminated")


def counter(key: str) -> ActorRef:
    return ActorRef(name="counter", key=(key,))


def settings(**endpoints: str) -> Settings:
    suffix = uuid.uuid4().hex[:12]
    return Settings(table=f"dormant-{suffix}", bucket=f"dormant-{suffix}", region="us-east-1",
                    offload_threshold_bytes=OFFLOAD, **endpoints)


def message(mid: str, body: Any = None) -> InboxMessage:
    return InboxMessage(id=mid, queue="counter", body=body if body is not None else {"delta": 1}, created_at=T0)


def dump(snapshot: ActorSnapshot | None) -> Any:
    """A snapshot as comparable JSON (held ids sorted)."""
    if snapshot is None:
        return None
    data = snapshot.model_dump(mode="json")
    data["held_ids"] = sorted(data["held_ids"])
    return data


def ask(holder: str) -> SlotRequest:
    return SlotRequest(rule=LIMIT, ref=ActorRef(name="payer", key=(holder,)), holder=holder, now=T0,
                       lease_until=T0 + 3600, queued_since=T0, queued=False)


async def write_actors(store: DynamoEventStore) -> dict[str, Any]:
    """Write the actors (see the module docstring); returns the refs by name and the slot lease."""
    refs: dict[str, ActorRef] = {}
    for status in STATUSES:
        actor = refs[status] = counter(status)
        assert await store.create(actor, ActorMeta(name="counter", key=actor.key, created_at=T0), {"value": 0},
                                  WorkflowRecord(), [("created", {"at": T0})])
        if status == "pending":
            continue
        for mid in ("m1", "m2", "m3"):
            assert await store.enqueue(actor, message(f"{status}-{mid}"))
        # a wake-up: consumes the first message, answers it, records an entry and an event, rests in `status`
        await store.commit(actor, 1, draft(upserts=[entry("main/take", 1, {"delta": 1})], state={"value": 1},
                                           consumed=[f"{status}-m1"], responses={f"{status}-m1": {"answer": 1}},
                                           events=[("took", {"n": 1})],
                                           workflow=WorkflowRecord(state=WorkflowState(status),
                                                                   waiting_for=["counter"]), at=T0 + 1))
    failed = refs["failed"]
    await store.record_wake_error(failed, WakeError(message="RuntimeError: boom", at=T0 + 2, receive_count=3,
                                                    version=2, failures=1))
    await store.mark_attention(failed, "wake_error", T0 + 2)

    kept = refs["kept"] = counter("kept")  # a lapped ring: snapshots, deltas, tombstones written by a snapshot
    assert await store.create(kept, ActorMeta(name="counter", key=kept.key, created_at=T0), {"value": 0},
                              WorkflowRecord(), [])
    version = 1
    for index, commit in enumerate(loop_commits(21)):
        mid = f"kept-{index}"
        assert await store.enqueue(kept, message(mid))
        await store.load(kept)
        version = await store.commit(kept, version, replace(commit, consumed_ids=[mid]))

    big = refs["big"] = counter("big")  # values in S3: the state, an entry's output, a pending message's body
    assert await store.create(big, ActorMeta(name="counter", key=big.key, created_at=T0, input={"pad": BIG}),
                              {"pad": BIG}, WorkflowRecord(), [])
    await store.commit(big, 1, draft(upserts=[entry("main/big", 1, {"pad": BIG})], state={"pad": BIG + "2"},
                                     workflow=WorkflowRecord(state=WorkflowState.SLEEPING), at=T0 + 1))
    assert await store.enqueue(big, message("big-m1", {"pad": BIG}))

    waiting = refs["callback"] = counter("callback")  # an open callback: its lookup item
    assert await store.create(waiting, ActorMeta(name="counter", key=waiting.key, created_at=T0), {},
                              WorkflowRecord(), [])
    change = CallbackChange(token_hash=TOKEN_HASH, callback_id="d" * 32, completion_id="callback-done",
                            name="approval", location="main/approval", state="open", deadline=T0 + 1000,
                            heartbeat_timeout=100.0, heartbeat_deadline=T0 + 100, at=T0 + 1)
    await store.commit(waiting, 1, draft(workflow=WorkflowRecord(state=WorkflowState.SLEEPING), callbacks=[change],
                                         at=T0 + 1))

    searched = await make_order(store, "o1", customer="acme", amount=12, vip=True)
    await store.commit(searched, 1, draft(search=attributes(amount=13, vip=None),
                                          workflow=WorkflowRecord(state=WorkflowState.SLEEPING), at=T0 + 1))
    refs["order"] = searched

    gone = counter("gone")  # deleted: only its deletion mark is left
    assert await store.create(gone, ActorMeta(name="counter", key=gone.key, created_at=T0), {}, WorkflowRecord(),
                              [])
    assert await store.delete(gone, at=T0 + 5)

    lease = await store.acquire_slot(ask("h1"))
    assert isinstance(lease, SlotLease)
    assert isinstance(await store.acquire_slot(ask("h2")), SlotLease)
    assert not isinstance(await store.acquire_slot(ask("h3")), SlotLease)  # in line: a waiter item
    return {"refs": refs, "gone": gone, "lease": lease}


async def expectations(store: DynamoEventStore, refs: dict[str, ActorRef]) -> dict[str, Any]:
    """What the store reads back from the table (the writing release's answers, kept beside its data)."""
    listing = await store.list_actors("counter", limit=100)
    kept = await store.retained_versions(refs["kept"])
    callback = await store.read_callback(TOKEN_HASH)
    return {
        "snapshots": {name: dump(await store.load(ref)) for name, ref in refs.items()},
        "listing": [summary.model_dump(mode="json") for summary in listing.actors],
        "kept_versions": [info.model_dump(mode="json") for info in kept or []],
        "oldest_kept": dump(await store.load_version(refs["kept"], kept[0].version)) if kept else None,
        "callback": callback.model_dump(mode="json") if callback is not None else None,
        "attention": [mark.model_dump(mode="json") for mark in (await store.list_attention("counter")).marks],
    }


RUNTIME_COUNTER = ActorRef(name="workflow-counter", key=("old",))  # examples/counter.py, woken by the runtime


async def run_counter(config: Settings) -> dict[str, Any]:
    """examples/counter.py's actor, created and sent to through the runtime (worker, SQS) in a table of its own (its
    history is the engine's, so the code under test can wake it and replay it): that table and bucket, captured."""
    from examples.counter import registry
    from tests.aws_env import AwsTestEnv

    async with AwsTestEnv(registry, settings=config.model_copy(update={"offload_threshold_bytes": 32 * 1024})) as env:
        handle = env.client.get_or_create(RUNTIME_COUNTER.name, list(RUNTIME_COUNTER.key))
        for delta in (2, 3, 5):
            await handle.send("counter", {"delta": delta})
            await env.run_until_idle()
        async with DynamoEventStore.connect(env.settings) as store:
            return await capture(store)


def _encode(value: Any) -> Any:
    """DynamoDB's JSON with bytes (the `B` type) as base64 text."""
    if isinstance(value, bytes):
        return {"__b64__": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {key: _encode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_encode(item) for item in value]
    return value


def decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__b64__"}:
            return base64.b64decode(value["__b64__"])
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item) for item in value]
    return value


async def capture(store: DynamoEventStore) -> dict[str, Any]:
    """Every item of the table and every object of the bucket."""
    items: list[Any] = []
    start: dict[str, Any] | None = None
    while True:
        page = await store.client.scan(TableName=store.table, ConsistentRead=True,
                                       **({"ExclusiveStartKey": start} if start else {}))
        items += page["Items"]
        start = page.get("LastEvaluatedKey")
        if not start:
            break
    blobs = store.values.blobs
    assert blobs is not None
    objects = {}
    for listed in await blobs.list(""):
        objects[listed.key] = (await blobs.get_many([listed.key]))[listed.key]
    items.sort(key=lambda item: (item["pk"]["S"], item["sk"]["S"]))
    return {"items": _encode(items), "objects": {key: base64.b64encode(data).decode()
                                                 for key, data in sorted(objects.items())}}


async def restore(store: DynamoEventStore, data: dict[str, Any]) -> None:
    """Load a captured table and bucket into the store's (fresh) table and bucket."""
    blobs = store.values.blobs
    assert blobs is not None
    await blobs.put_many({key: base64.b64decode(text) for key, text in data["objects"].items()})
    await store.requests.put_all(decode(data["items"]))


async def _generate(path: Path) -> None:
    from tests.servers import DynamoDBLocal, MotoServer, fake_aws_environment

    os.environ.update(fake_aws_environment())
    dynamodb, moto = DynamoDBLocal(), MotoServer()
    dynamodb.start()
    moto.start()
    try:
        config = settings(endpoint_url=moto.endpoint, dynamodb_endpoint_url=dynamodb.endpoint)
        async with DynamoEventStore.connect(config, clock=lambda: STORE_NOW) as store:
            await store.create_table()
            assert store.values.blobs is not None
            await store.values.blobs.client.create_bucket(Bucket=config.bucket)
            written = await write_actors(store)
            refs = written["refs"]
            refs["runtime"] = RUNTIME_COUNTER
            await restore(store, await run_counter(config))
            data = await capture(store)
            reader = DynamoEventStore(store.client, config, clock=lambda: STORE_NOW, blobs=store.values.blobs)
            data["refs"] = {name: [ref.name, *ref.key] for name, ref in refs.items()}
            data["expected"] = await expectations(reader, refs)
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    finally:
        dynamodb.stop()
        moto.stop()


if __name__ == "__main__":
    asyncio.run(_generate(Path(sys.argv[1])))
