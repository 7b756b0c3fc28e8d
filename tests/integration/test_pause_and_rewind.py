"""Pause/unpause, fork and reset on the AWS stack (DynamoDB Local, SQS and S3 on moto, the worker behind the
poller): sends racing pauses and unpauses are each applied once; a fork runs on through SQS; a refused fork stores
nothing; with large values a fork stores its objects under the new actor and a reset neither loses nor leaks one."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from dormant.dynamodb.ring import RELEASES
from dormant.dynamodb.store import DynamoEventStore
from dormant.dynamodb.versions import kept_heads
from dormant.errors import ActorExistsError, WouldDivergeError
from dormant.ports import ActorRef
from dormant.s3.large_values import DURABLE, actor_hash
from dormant.settings import Settings
from dormant.workflow.history import WorkflowState
from tests.aws_env import AwsTestEnv
from tests.integration.test_large_values import objects
from tests.large_app import registry as large_registry
from tests.unit.test_pause import registry as ledger_registry
from tests.unit.test_rewind import registry as opened_registry
from tests.unit.test_rewind import renamed


async def test_sends_racing_pauses_and_unpauses_are_each_applied_exactly_once(aws_endpoints: dict[str, str]) -> None:
    """60 sends from three tasks while a fourth pauses and unpauses the actor eight times, wake-ups racing all of
    them (autorun: the pollers run all the time, as Lambda's event source does)."""
    async with AwsTestEnv(ledger_registry, settings=Settings(**aws_endpoints), autorun=True) as env:
        handle = env.client.get_or_create("ledger", ["load"])
        await handle.send("add", {"n": 0})
        await env.run_until_idle()
        values = list(range(1, 61))
        pauses: list[str] = []

        async def sender(chunk: list[int]) -> None:
            for n in chunk:
                result = await handle.send("add", {"n": n})
                assert result.status == "queued"
                await asyncio.sleep(random.uniform(0, 0.02))

        async def toggler() -> None:
            for _ in range(8):
                pauses.append((await handle.pause("load test")).outcome)
                await asyncio.sleep(random.uniform(0.02, 0.1))
                pauses.append((await handle.unpause()).outcome)
                await asyncio.sleep(random.uniform(0.02, 0.1))

        await asyncio.gather(sender(values[0::3]), sender(values[1::3]), sender(values[2::3]), toggler())
        assert pauses == ["paused", "unpaused"] * 8
        await env.run_until_idle()
        state = await handle.state()
        assert sorted(state.log) == [0, *values]  # every message once: none lost, none applied twice
        assert state.value == sum(values)
        assert (await handle.status()).workflow is WorkflowState.SLEEPING and (await handle.inbox()).total == 0
        assert not env.failures


async def test_a_paused_actor_on_aws_keeps_its_message_and_its_timer_until_unpaused(
        aws_endpoints: dict[str, str]) -> None:
    async with AwsTestEnv(ledger_registry, settings=Settings(**aws_endpoints)) as env:
        handle = env.client.get_or_create("ledger", ["held"])
        await handle.send("nap", 600)
        await env.run_until_idle()
        await handle.pause("deploying")
        await handle.send("add", {"n": 4})
        await env.run_until_idle()
        await env.advance(1200)  # the nap's deadline passes while paused
        assert (await handle.state()).log == [] and (await handle.inbox()).total == 1
        assert [s.key async for s in env.client.actors("ledger", status="paused")] == [("held",)]
        await handle.unpause()
        await env.run_until_idle()
        assert (await handle.state()).log == ["woke", 4]


async def test_fork_and_reset_on_aws(aws_endpoints: dict[str, str]) -> None:
    async with AwsTestEnv(opened_registry, settings=Settings(**aws_endpoints)) as env:
        handle = env.client.get_or_create("ledger", ["a"], input={"owner": "a"})
        at = {}
        for n in (1, 2, 3):
            await handle.send("add", {"n": n})
            await env.run_until_idle()
            at[n] = (await handle.status()).version
        assert [v.version for v in await handle.versions()][-1] == at[3]
        forked = await handle.fork(at[2], "b", reason="aws")
        assert forked.outcome == "forked"
        await env.run_until_idle()
        copy = env.client.get_or_create("ledger", ["b"])
        await copy.send("add", {"n": 20})
        await env.run_until_idle()
        assert (await copy.state()).log == [1, 2, 20] and (await handle.state()).log == [1, 2, 3]
        with pytest.raises(ActorExistsError):
            await handle.fork(at[1], "b")
        reset = await handle.reset(at[1], reason="aws reset")
        assert reset.outcome == "reset" and "2 message(s) received after" in reset.message
        await env.run_until_idle()
        await handle.send("add", {"n": 30})
        await env.run_until_idle()
        assert (await handle.state()).log == [1, 30]
        status = await handle.status()
        assert status.rewritten is not None and status.rewritten.reason == "aws reset"
        store = env.store
    async with AwsTestEnv(renamed, store=store) as deployed:
        source = deployed.client.get_or_create("ledger", ["a"])
        version = (await source.status()).version
        with pytest.raises(WouldDivergeError):
            await source.fork(version, "c")
        with pytest.raises(WouldDivergeError):
            await source.reset(version - 1)
        assert await deployed.store.load(ActorRef(name="ledger", key=("c",))) is None
        assert (await source.status()).version == version


async def _kept_objects(store: DynamoEventStore, ref: ActorRef) -> set[str]:
    """The objects some kept version of `ref` refers to, and those the ring still has to release."""
    items = await store.ring.items(ref)
    heads = kept_heads(items)
    assert heads is not None
    kept = {key for head, _ in heads for key in head.all_refs()}
    return kept | {key for item in items if RELEASES in item for key in item[RELEASES]["SS"]}


async def test_with_large_values_a_fork_stores_its_own_objects_and_a_reset_neither_loses_nor_leaks_one(
        aws_endpoints: dict[str, str]) -> None:
    settings = Settings(**aws_endpoints, snapshot_every=4)
    async with AwsTestEnv(large_registry, settings=settings) as env:
        handle = env.client.get_or_create("large-notebook", ["big"])
        at: dict[int, int] = {}
        for index, fill in enumerate("abc"):
            await handle.send("append", {"kb": 100, "fill": fill})
            await env.run_until_idle()
            at[index] = (await handle.status()).version
        inner: Any = env.store
        store: DynamoEventStore = inner.inner if hasattr(inner, "inner") else inner
        source_prefix = f"{DURABLE}{actor_hash(handle.ref)}/"
        before = {k for k in await objects(env) if k.startswith(source_prefix)}

        await handle.fork(at[1], "copy")
        await env.run_until_idle()
        copy = env.client.get_or_create("large-notebook", ["copy"])
        assert [chunk[0] for chunk in (await copy.state()).chunks] == ["a", "b"]
        stored = await objects(env)
        assert any(k.startswith(f"{DURABLE}{actor_hash(copy.ref)}/") for k in stored)
        assert {k for k in stored if k.startswith(source_prefix)} == before  # the source's objects untouched

        await handle.reset(at[0])
        await env.run_until_idle()
        assert [len(c) for c in (await handle.state()).chunks] == [100_000]
        for fill in "defgh":  # two laps of the ring: what the reset released is deleted a lap later
            await handle.send("append", {"kb": 1, "fill": fill})
            await env.run_until_idle()
            left = {k for k in await objects(env) if k.startswith(source_prefix)}
            assert left == await _kept_objects(store, handle.ref)  # nothing kept is missing, nothing else is left
            for info in await handle.versions():
                assert (await handle.version(info.version)).version == info.version  # every kept version loads
        assert [c[0] for c in (await handle.state()).chunks] == ["a", "d", "e", "f", "g", "h"]
        assert [chunk[0] for chunk in (await copy.state()).chunks] == ["a", "b"]
