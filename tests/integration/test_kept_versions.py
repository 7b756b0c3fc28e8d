"""The versions a store keeps for fork and reset (dormant.runtime.versions): the same on MemoryEventStore and on the
DynamoDB store over DynamoDB Local, moto and dynalite, for the same commits; each reads back exactly as the actor
was; what reading them costs on DynamoDB."""

from __future__ import annotations

from typing import Any

import pytest

from dormant.dynamodb.store import DynamoEventStore
from dormant.errors import VersionNotRetainedError
from dormant.ports import ActorRef, ActorSnapshot, EventStore
from dormant.workflow.history import WorkflowRecord, WorkflowState
from tests.integration.conftest import shared_session, watch
from tests.integration.test_store_contract import T0, any_store, created, draft, entry

__all__ = ["any_store"]  # the fixture, imported to be used here


def _commits(count: int, *, state_bytes: int = 0) -> list[Any]:
    """Loop-like commits: each writes an iteration's entries, deletes the iteration two back (compaction), moves the
    state and, every third, the workflow record."""
    drafts = []
    for index in range(count):
        upserts = [entry(f"main/~{index}/take", 2 * index + 2, {"n": index}),
                   entry(f"main/~{index}/apply", 2 * index + 3, index)]
        deleted = [f"main/~{index - 2}"] if index >= 2 else []
        workflow = WorkflowRecord(state=WorkflowState.SLEEPING if index % 2 else WorkflowState.RUNNING,
                                  waiting_for=["counter"]) if index % 3 == 0 else None
        drafts.append(draft(upserts=upserts, deleted=deleted, state={"value": index, "pad": "p" * state_bytes},
                            workflow=workflow, at=T0 + index + 1))
    return drafts


async def _apply(store: EventStore, ref: ActorRef, drafts: list[Any]) -> dict[int, ActorSnapshot]:
    seen: dict[int, ActorSnapshot] = {}
    version = 1
    first = await store.load(ref)
    assert first is not None
    seen[1] = first
    for commit in drafts:
        version = await store.commit(ref, version, commit)
        loaded = await store.load(ref)
        assert loaded is not None
        seen[version] = loaded
    return seen


def _same(old: ActorSnapshot, then: ActorSnapshot) -> bool:
    return (old.version, old.state, old.workflow, sorted(old.history, key=lambda e: e.location)) == (
        then.version, then.state, then.workflow, sorted(then.history, key=lambda e: e.location))


async def test_every_store_keeps_the_same_versions_and_reads_each_back_as_it_was(any_store: EventStore) -> None:
    """snapshot_every is 16 on both: small commits snapshot at 1, 17, 33; after 40 commits (version 41) the ring
    holds 26..41 and the oldest snapshot in it is 33."""
    ref = await created(any_store, "kept")
    seen = await _apply(any_store, ref, _commits(40))
    kept = await any_store.retained_versions(ref)
    assert kept is not None and [v.version for v in kept] == list(range(33, 42))
    for info in kept:
        old = await any_store.load_version(ref, info.version)
        assert old is not None and _same(old, seen[info.version]), info.version
        assert old.inbox == [] and info.entries == len(seen[info.version].history)
        assert info.status is seen[info.version].workflow.state
    assert kept[0].changed is None and kept[0].received is None  # the oldest: its commit is not kept
    # version 34's commit wrote iteration 32 and compacted iteration 30
    assert set(kept[1].changed or []) == {"main/~32/apply", "main/~32/take", "main/~30/apply", "main/~30/take"}
    for version in (0, 1, 32, 42):
        with pytest.raises(VersionNotRetainedError, match="keeps versions 33 to 41"):
            await any_store.load_version(ref, version)
    assert await any_store.retained_versions(ActorRef(name="counter", key=("none",))) is None
    assert await any_store.load_version(ActorRef(name="counter", key=("none",)), 1) is None


async def test_big_commits_snapshot_sooner_on_every_store(any_store: EventStore) -> None:
    """A state of 40 KB in every commit: the deltas pass 96 KB at the third commit after a snapshot, so versions 1,
    4, 7, ... are snapshots; at version 21 the ring (16) holds 6..21, and the oldest snapshot in it is 7."""
    ref = await created(any_store, "big")
    seen = await _apply(any_store, ref, _commits(20, state_bytes=40_000))
    kept = await any_store.retained_versions(ref)
    assert kept is not None
    assert max(seen) == 21 and [v.version for v in kept] == list(range(7, 22))
    for info in kept[:3]:
        old = await any_store.load_version(ref, info.version)
        assert old is not None and _same(old, seen[info.version])


async def test_another_process_reads_the_same_kept_versions(store: DynamoEventStore) -> None:
    ref = await created(store, "cold")
    await _apply(store, ref, _commits(20))
    kept = await store.retained_versions(ref)
    async with DynamoEventStore.connect(store.settings, session=shared_session()) as other:  # nothing cached
        assert await other.retained_versions(ref) == kept


async def test_listing_kept_versions_or_loading_one_is_one_query_of_the_ring(store: DynamoEventStore) -> None:
    ref = await created(store, "cost")
    await _apply(store, ref, _commits(20))
    log = watch(store.client)
    kept = await store.retained_versions(ref)
    assert kept is not None
    await store.load_version(ref, kept[0].version)
    assert log.counts() == {"Query": 2}
