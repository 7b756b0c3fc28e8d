"""Values of any size (issue 19): over the offload threshold they go to S3 and the items keep references, through
the whole AWS path (client, SQS, the worker) on DynamoDB Local and on moto, S3 on moto. What goes out comes back
whole; small values cost no S3 request; objects are deleted with their actor, released a ring lap after the version
that stopped referring to them, and swept when nothing ever referred to them."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dormant.core.limits import VALUE
from dormant.dynamodb.store import DynamoEventStore
from dormant.errors import ItemTooLargeError
from dormant.s3 import offload
from dormant.s3.blobs import BlobMissing
from dormant.s3.large_values import DURABLE, EPHEMERAL, actor_hash
from dormant.settings import Settings
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import WorkflowState
from examples.counter import registry as counter_registry
from tests.aws_env import AwsTestEnv
from tests.large_app import digest, registry
from tests.references import dangling


@pytest.fixture(params=["dynamodb_local", "moto"])
def endpoints(request: pytest.FixtureRequest) -> dict[str, str]:
    sqs = request.getfixturevalue("moto_server")
    dynamodb = request.getfixturevalue("dynamodb_local_server") if request.param == "dynamodb_local" else sqs
    return {"endpoint_url": sqs, "dynamodb_endpoint_url": dynamodb}


@pytest.fixture
async def env(endpoints: dict[str, str]) -> AsyncIterator[AwsTestEnv]:
    async with AwsTestEnv(registry, settings=Settings(**endpoints, snapshot_every=4)) as created:
        yield created


async def objects(env: AwsTestEnv, kind: str = DURABLE) -> dict[str, int]:
    """key -> size of every object in the env's bucket under `kind`."""
    found: dict[str, int] = {}
    kwargs: dict[str, Any] = {"Bucket": env.settings.bucket, "Prefix": kind}
    while True:
        page = await env.s3.list_objects_v2(**kwargs)
        found.update({item["Key"]: item["Size"] for item in page.get("Contents", [])})
        if not page.get("IsTruncated"):
            return found
        kwargs["ContinuationToken"] = page["NextContinuationToken"]


async def largest_item(env: AwsTestEnv) -> int:
    """Bytes of the biggest item in the env's table (as DynamoDB counts it, roughly)."""
    from dormant.aws.metering import item_size

    client = env.store.client  # type: ignore[attr-defined]
    biggest, kwargs = 0, {"TableName": env.settings.table}
    while True:
        page = await client.scan(**kwargs)
        biggest = max([biggest, *(item_size(item) for item in page.get("Items", []))])
        if "LastEvaluatedKey" not in page:
            return biggest
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


async def test_state_of_3_mb_a_2_mb_result_and_a_500_kb_message_are_processed_and_read_back_whole(
        env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("large-notebook", ["n"])
    text = "t" * 500_000
    await handle.send("echo", {"text": text})
    for index in range(30):  # 30 steps of 100 KB: 3 MB of state
        await handle.send("append", {"kb": 100, "fill": chr(ord("a") + index % 26)})
    await handle.send("result", {"size": 2_000_000})
    await env.run_until_idle()
    state = await handle.state()
    assert state.digests == [digest(text)]  # the workflow saw the whole body
    assert [len(chunk) for chunk in state.chunks] == [100_000] * 30
    assert [chunk[0] for chunk in state.chunks] == [chr(ord("a") + i % 26) for i in range(30)]
    assert state.results == [2_000_000]
    assert await handle.call("total") == 3_000_000
    assert (await handle.status()).workflow is WorkflowState.SLEEPING and not env.failures
    stored = await objects(env)
    # 26 distinct chunks (content-addressed: the 4 repeated fills are one object each), and more
    assert len(stored) >= 26 and all(key.startswith(f"{DURABLE}{actor_hash(handle.ref)}/") for key in stored)
    assert await largest_item(env) < 200_000  # the items keep references, not the values
    history = await handle.history()
    produced = next(entry for entry in history if entry.location.endswith("produce"))
    assert produced.output == "r" * 2_000_000
    events = [record async for record in handle.events(follow=False)]
    assert [len(record.payload["text"]) for record in events] == [500_000]


async def test_a_new_deploy_reads_offloaded_values_from_another_process(env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("large-notebook", ["fresh"])
    await handle.send("append", {"kb": 200})
    await env.run_until_idle()
    async with DynamoEventStore.connect(env.settings) as other:  # a cold container: nothing cached
        snapshot = await other.load(handle.ref)
        assert snapshot is not None and [len(c) for c in snapshot.state["chunks"]] == [200_000]


async def test_small_values_make_no_s3_request(endpoints: dict[str, str]) -> None:
    async with AwsTestEnv(counter_registry, settings=Settings(**endpoints)) as env:
        before = env.meter.copy()  # after the env made its bucket
        handle = env.client.get_or_create("workflow-counter", ["small"])
        for delta in range(5):
            await handle.send("counter", {"delta": delta})
        await env.run_until_idle()
        assert (await handle.state()).value == 10
        spent = env.meter - before
        assert spent.count("dynamodb") > 0 and spent.count("s3") == 0, spent.requests


async def test_values_within_the_threshold_are_never_walked_by_the_offloading(env: AwsTestEnv,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """With a bucket, a creation's, a send's and a commit's values are sized once, by the engine's encoder (the same
    measure serves the limits, the commit and the offload decision); the offloading's walk of a value in Python runs
    only for a value over the threshold (the walk cost 0.16 ms a queue-loop commit of the counter's sizes, 3.7 ms with
    a state of 200 small items: docs/performance.md, "Large values")."""
    walks: list[int] = []
    walk = offload.json_bytes

    def counted(value: Any) -> int:
        walks.append(1)
        return walk(value)

    monkeypatch.setattr(offload, "json_bytes", counted)
    handle = env.client.get_or_create("large-notebook", ["walks"])
    for n in range(5):  # created by the first send; each echo: a step, the state, an event
        await handle.send("echo", {"text": f"small {n}"})
    await env.run_until_idle()
    assert len((await handle.state()).digests) == 5
    assert walks == []
    await handle.send("echo", {"text": "e" * (env.settings.offload_threshold_bytes + 1)})  # over: walked, offloaded
    assert walks
    await env.run_until_idle()
    assert len((await handle.state()).digests) == 6


async def test_a_big_response_and_a_big_event_reach_their_readers(env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("large-answers", ["a"])
    result = await handle.send("ask", {"size": 300_000}, wait=True, timeout=30)
    assert result.status == "completed" and result.response is not None
    assert len(result.response["text"]) == 300_000
    assert any(key.startswith(f"{EPHEMERAL}{actor_hash(handle.ref)}/") for key in await objects(env, EPHEMERAL))


async def test_deleting_an_actor_deletes_its_objects(env: AwsTestEnv) -> None:
    keep = env.client.get_or_create("large-notebook", ["keep"])
    gone = env.client.get_or_create("large-notebook", ["gone"])
    for handle in (keep, gone):
        await handle.send("append", {"kb": 120})
        await handle.send("echo", {"text": "e" * 90_000})
    await env.run_until_idle()
    prefix = f"{DURABLE}{actor_hash(gone.ref)}/"
    assert any(key.startswith(prefix) for key in await objects(env))
    await gone.delete()
    left = await objects(env)
    assert not any(key.startswith(prefix) for key in left)
    assert any(key.startswith(f"{DURABLE}{actor_hash(keep.ref)}/") for key in left)
    assert not any(key.startswith(f"{EPHEMERAL}{actor_hash(gone.ref)}/") for key in await objects(env, EPHEMERAL))
    assert len((await keep.state()).chunks) == 1


async def test_objects_a_version_stopped_referring_to_are_deleted_a_ring_lap_later(env: AwsTestEnv) -> None:
    """20 loop iterations, each with a 60 KB step result (a ring of 4: snapshot_every=4): the finished iterations
    are compacted, and their results' objects deleted a lap later; they do not pile up."""
    handle = env.client.get_or_create("large-notebook", ["churn"])
    for round_ in range(20):
        await handle.send("result", {"size": 60_000 + round_})
        await env.run_until_idle()
    assert (await handle.state()).results == [60_000 + round_ for round_ in range(20)]
    stored = await objects(env)
    # the live window's results (the current and 2 kept iterations) and those released less than a lap ago
    assert len(stored) <= 3 + 4 * 2, sorted(stored)


async def test_an_orphan_of_a_lost_race_is_swept(endpoints: dict[str, str]) -> None:
    settings = Settings(**endpoints, snapshot_every=4, blob_sweep_every=2, blob_orphan_grace_seconds=0)
    async with AwsTestEnv(registry, settings=settings) as env:
        handle = env.client.get_or_create("large-notebook", ["race"])
        await handle.send("append", {"kb": 1})
        await env.run_until_idle()
        inner: DynamoEventStore = env.store.inner  # type: ignore[attr-defined]
        snapshot = await inner.load(handle.ref)
        assert snapshot is not None
        async with DynamoEventStore.connect(env.settings) as rival:
            await rival.load(handle.ref)
            big = {**snapshot.state, "chunks": ["L" * 80_000]}
            await rival.commit(handle.ref, snapshot.version, CommitDraft(
                upserts=[], deleted_prefixes=[], state={**snapshot.state, "chunks": ["W" * 80_000]},
                consumed_ids=[], responses={}, events=[], workflow=None, committed_at=1.0))
        with pytest.raises(Exception, match="no longer current"):  # the loser wrote its object first
            await inner.commit(handle.ref, snapshot.version, CommitDraft(
                upserts=[], deleted_prefixes=[], state=big, consumed_ids=[], responses={}, events=[],
                workflow=None, committed_at=1.0))
        loser = hashlib.sha256(('"' + "L" * 80_000 + '"').encode()).hexdigest()  # its chunk's JSON
        assert any(loser in key for key in await objects(env))
        for _ in range(3):  # commits until one sweeps (every 2nd version)
            await handle.send("append", {"kb": 1})
            await env.run_until_idle()
        left = await objects(env)
        assert not any(loser in key for key in left)
        assert len((await handle.state()).chunks) == 4 and any("W" * 10 in c for c in (await handle.state()).chunks)


async def test_a_value_over_the_ceiling_is_refused_with_nothing_stored(env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("large-notebook", ["huge"])
    with pytest.raises(ItemTooLargeError, match="stored value") as refused:
        await handle.send("echo", {"text": "h" * (VALUE.maximum + 1)})
    assert refused.value.limit is VALUE
    assert await objects(env) == {} and await env.store.load(handle.ref) is None


async def test_a_reader_that_misses_an_object_reads_again(env: AwsTestEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    handle = env.client.get_or_create("large-notebook", ["miss"])
    await handle.send("append", {"kb": 60})
    await env.run_until_idle()
    inner: DynamoEventStore = env.store.inner  # type: ignore[attr-defined]
    assert inner.values.blobs is not None
    real = inner.values.blobs.get_many
    misses = []

    async def flaky(keys: Any) -> dict[str, bytes]:
        if not misses:
            misses.append(1)
            raise BlobMissing("deleted after the version that named it")
        return await real(keys)

    monkeypatch.setattr(inner.values.blobs, "_cache", type(inner.values.blobs._cache)())
    monkeypatch.setattr(inner.values.blobs, "get_many", flaky)
    snapshot = await inner.load(handle.ref)
    assert misses and snapshot is not None and len(snapshot.state["chunks"][0]) == 60_000


async def test_an_in_process_queue_wait_receives_a_big_message(env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("large-notebook", ["wait"])
    await handle.send("append", {"kb": 1})
    await env.run_until_idle()
    async with env.running():
        await asyncio.sleep(0.2)
        await handle.send("echo", {"text": "w" * 70_000})
        await env.run_until_idle()
    assert (await handle.state()).digests == [digest("w" * 70_000)]


async def test_a_response_over_the_functions_limit_is_handed_out_through_s3(env: AwsTestEnv) -> None:
    """The API on Lambda answers at most 6 MB: with max_response_bytes (set by functions/api/handler.py) a bigger
    body is put in S3 and answered with 303 to a presigned URL, which HttpClient follows; smaller ones as usual."""
    import httpx

    from dormant.http.app import create_app
    from dormant.http.client import HttpClient
    from tests.api.support import serve

    handle = env.client.get_or_create("large-notebook", ["big-read"])
    for index in range(3):
        await handle.send("append", {"kb": 100, "fill": "xyz"[index]})
    await env.run_until_idle()
    settings = env.settings.model_copy(update={"max_response_bytes": 200_000, "auth_mode": "none", "dev": True})
    async with serve(create_app(registry, settings)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as raw:  # the first request opens the AWS clients
            answer = await raw.get("/actors/large-notebook/big-read/state")
            assert answer.status_code == 303 and "X-Amz-Signature" in answer.headers["location"]
            assert "x" * 100 not in answer.text  # the body is not in the redirect
            small = await raw.get("/actors/large-notebook/big-read/status")
            assert small.status_code == 200 and small.json()["workflow"] == "sleeping"
        async with HttpClient(url) as client:
            state = await client.get_or_create("large-notebook", ["big-read"]).state()
            assert [chunk[:1] * 3 for chunk in state["chunks"]] == ["xxx", "yyy", "zzz"]
            assert [len(chunk) for chunk in state["chunks"]] == [100_000] * 3
    assert any(key.startswith("ephemeral/responses/") for key in await objects(env, EPHEMERAL))


async def test_two_pending_messages_with_one_large_value_are_both_applied_and_nothing_dangles(
        env: AwsTestEnv) -> None:
    """Issue 26.1's repro: J and K carry the same 100 KB field, 20 messages apart, while the actor is paused; the
    commits that compact J's iteration and lap the ring must not delete what K (its inbox item, then its entry) refers
    to. Every message is applied, no item refers to a missing object, and later sends are applied."""
    handle = env.client.get_or_create("large-notebook", ["shared"])
    await handle.send("append", {"kb": 0})
    await env.run_until_idle()
    await handle.pause()
    text = "j" * 100_000
    await handle.send("echo", {"text": text})
    for _ in range(20):
        await handle.send("append", {"kb": 0})
    await handle.send("echo", {"text": text})
    await handle.send("append", {"kb": 0})
    await handle.unpause()
    await env.run_until_idle()
    client = env.store.client  # type: ignore[attr-defined]
    assert await dangling(client, env.s3, env.settings.table, env.settings.bucket) == {}
    await handle.send("append", {"kb": 0})
    await env.run_until_idle()
    state = await handle.state()
    assert state.digests == [digest(text)] * 2 and len(state.chunks) == 23 and not env.failures
    assert await dangling(client, env.s3, env.settings.table, env.settings.bucket) == {}
