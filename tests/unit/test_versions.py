"""Which versions the memory store keeps (dormant.runtime.versions): the DynamoDB ring's rule, so TestEnv keeps
what production keeps; every kept version reads back exactly as the actor was then; the rest are refused."""

from __future__ import annotations

import json

import pytest

from dormant import StepContext, WorkflowContext, actor, queue, setup
from dormant.errors import VersionNotRetainedError
from dormant.memory.store import MemoryEventStore
from dormant.ports import ActorSnapshot
from dormant.runtime.versions import SNAPSHOT_AFTER_BYTES, commit_weight, snapshot_due
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item

tally = actor("tally", state=Counter, queues={"add": queue(Item)})


@tally.workflow
async def run_tally(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("take")

        def apply(s: StepContext) -> None:
            s.state.value += message.body.n
            s.state.log.append("x" * message.body.n if message.body.n > 1000 else message.body.n)
        await loop.step("apply", apply)
    await ctx.loop("main", iteration, history_keep=1)


registry = setup(tally)


def expected_kept(newest: int, ring: int, snapshots: list[int]) -> list[int]:
    in_ring = range(max(1, newest - ring + 1), newest + 1)
    start = min(v for v in in_ring if v in snapshots)
    return list(range(start, newest + 1))


async def _run(env: TestEnv, sizes: list[int]) -> dict[int, ActorSnapshot]:
    """Send one message per size, recording the actor as loaded at every version it passes."""
    handle = env.client.get_or_create("tally", ["t"])
    seen: dict[int, ActorSnapshot] = {}
    for n in sizes:
        await handle.send("add", {"n": n})
        await env.run_until_idle()
        snapshot = await env.store.load(handle.ref)
        assert snapshot is not None
        seen[snapshot.version] = snapshot
    return seen


def test_a_snapshot_is_due_a_ring_after_the_last_or_once_the_deltas_pass_the_weight() -> None:
    """The one rule both stores decide snapshots by (tests/contract/test_versions.py holds them to it)."""
    assert not snapshot_due(16, 1, 16, 0, 10) and snapshot_due(17, 1, 16, 0, 10)
    assert not snapshot_due(5, 1, 16, SNAPSHOT_AFTER_BYTES - 10, 10)
    assert snapshot_due(5, 1, 16, SNAPSHOT_AFTER_BYTES - 10, 11)
    entry = {"location": "main/step", "output": "é" * 10}
    assert commit_weight([entry], {"n": 1}, None) == (len(json.dumps(entry, separators=(",", ":"),
                                                                    ensure_ascii=False).encode()) + 7 + 4)


async def test_kept_versions_run_from_the_oldest_snapshot_in_the_ring_to_the_newest() -> None:
    store = MemoryEventStore(snapshot_every=4)
    async with TestEnv(registry, store=store) as env:
        handle = env.client.get_or_create("tally", ["t"])
        await handle.status()  # created: version 1
        await env.run_until_idle()
        lengths = set()
        for n in range(1, 9):
            await handle.send("add", {"n": n})
            await env.run_until_idle()
            kept = await store.retained_versions(handle.ref)
            assert kept is not None
            newest = kept[-1].version
            assert newest == (await handle.status()).version
            # small commits: a snapshot every 4 versions (1, 5, 9, ...), the ring holds the last 4
            assert [v.version for v in kept] == expected_kept(newest, 4, list(range(1, newest + 1, 4)))
            lengths.add(len(kept))
        assert lengths == {1, 2, 3, 4}  # between 1 and snapshot_every versions, as the ring turns
        assert await store.retained_versions(env.client.get_or_create("tally", ["none"]).ref) is None


async def test_every_kept_version_reads_back_as_the_actor_was_then() -> None:
    store = MemoryEventStore(snapshot_every=8)
    async with TestEnv(registry, store=store) as env:
        seen = await _run(env, [1, 2, 3, 4, 5, 6, 7])
        ref = next(iter(seen.values())).ref
        kept = await store.retained_versions(ref)
        assert kept is not None
        checked = 0
        for info in kept:
            if info.version not in seen:
                continue
            old = await store.load_version(ref, info.version)
            then = seen[info.version]
            assert old is not None and old.version == info.version
            assert (old.state, old.workflow, sorted(old.history, key=lambda e: e.location)) == (
                then.state, then.workflow, sorted(then.history, key=lambda e: e.location))
            assert old.inbox == [] and info.status is then.workflow.state and info.entries == len(then.history)
            checked += 1
        assert checked >= 3


async def test_a_version_not_kept_is_refused_naming_what_is_kept() -> None:
    store = MemoryEventStore(snapshot_every=4)
    async with TestEnv(registry, store=store) as env:
        seen = await _run(env, list(range(1, 12)))
        ref = next(iter(seen.values())).ref
        kept = await store.retained_versions(ref)
        assert kept is not None
        oldest, newest = kept[0].version, kept[-1].version
        assert oldest > 1
        for version in (0, -3, 1, oldest - 1, newest + 1, 10**12):
            with pytest.raises(VersionNotRetainedError, match=f"keeps (version|versions) {oldest}"):
                await store.load_version(ref, version)
        assert await store.load_version(env.client.get_or_create("tally", ["none"]).ref, 1) is None


async def test_big_deltas_make_snapshots_sooner_as_in_dynamodb() -> None:
    """40 KB more state a commit: from the commit whose deltas pass 96 KB on, every commit is a snapshot, so a ring
    of 4 keeps all 4 of its versions (small commits: only those since the last every-4th snapshot)."""
    for sizes, kept_versions in (([40_000] * 6, [4, 5, 6, 7]), ([1] * 6, [5, 6, 7])):
        store = MemoryEventStore(snapshot_every=4)
        async with TestEnv(registry, store=store) as env:
            seen = await _run(env, sizes)
            ref = next(iter(seen.values())).ref
            assert max(seen) == 7
            kept = await store.retained_versions(ref)
            assert kept is not None and [v.version for v in kept] == kept_versions, sizes[0]


async def test_a_kept_version_holds_only_what_loop_compaction_had_left() -> None:
    store = MemoryEventStore(snapshot_every=16)
    async with TestEnv(registry, store=store) as env:
        seen = await _run(env, [1, 2, 3, 4, 5])
        ref = next(iter(seen.values())).ref
        kept = await store.retained_versions(ref)
        assert kept is not None and kept[0].version == 1  # the ring has not lapped: every version is kept

        async def iterations(version: int) -> set[str]:
            old = await store.load_version(ref, version)
            assert old is not None
            return {e.location.split("/")[1] for e in old.history if e.location.startswith("main/~")}

        # history_keep=1: at rest, only the iteration that finished last is live; earlier ones were compacted
        assert await iterations(max(seen)) == {"~4"}
        third = sorted(seen)[2]
        assert await iterations(third) == {"~2"}
        taking = [v for v in kept if v.received]
        assert len(taking) == 5 and all(len(v.received or []) == 1 and v.consumed == 1 for v in taking)
        assert all(v.changed for v in taking)
