"""Kept versions (retained_versions, load_version, VersionNotRetainedError): for the same commits every backend keeps
the same versions, and reads each back exactly as the actor was (dormant.runtime.versions). What reading them costs on
DynamoDB, and another process reading the same, are in tests/integration/test_kept_versions.py."""

from __future__ import annotations

import pytest

from dormant.errors import VersionNotRetainedError
from dormant.ports import ActorRef, ActorSnapshot, EventStore
from tests.contract.conftest import Backend
from tests.contract.support import apply_commits, created, loop_commits


def _same(old: ActorSnapshot, then: ActorSnapshot) -> bool:
    return (old.version, old.state, old.workflow, sorted(old.history, key=lambda e: e.location)) == (
        then.version, then.state, then.workflow, sorted(then.history, key=lambda e: e.location))


async def test_every_store_keeps_the_same_versions_and_reads_each_back_as_it_was(store: EventStore) -> None:
    """snapshot_every is 16 on both: small commits snapshot at 1, 17, 33; after 40 commits (version 41) the ring
    holds 26..41 and the oldest snapshot in it is 33."""
    ref = await created(store, "kept")
    seen = await apply_commits(store, ref, loop_commits(40))
    kept = await store.retained_versions(ref)
    assert kept is not None and [v.version for v in kept] == list(range(33, 42))
    for info in kept:
        old = await store.load_version(ref, info.version)
        assert old is not None and _same(old, seen[info.version]), info.version
        assert old.inbox == [] and info.entries == len(seen[info.version].history)
        assert info.status is seen[info.version].workflow.state
    assert kept[0].changed is None and kept[0].received is None  # the oldest: its commit is not kept
    # version 34's commit wrote iteration 32 and compacted iteration 30
    assert set(kept[1].changed or []) == {"main/~32/apply", "main/~32/take", "main/~30/apply", "main/~30/take"}
    for version in (0, 1, 32, 42):
        with pytest.raises(VersionNotRetainedError, match="keeps versions 33 to 41"):
            await store.load_version(ref, version)
    assert await store.retained_versions(ActorRef(name="counter", key=("none",))) is None
    assert await store.load_version(ActorRef(name="counter", key=("none",)), 1) is None


@pytest.mark.parametrize(("state_bytes", "oldest", "cold"), [
    (30_000, 9, False),
    (40_000, 7, False),  # with a bucket (as deployed) the states are kept in S3: they weigh their JSON all the same
    (40_000, 7, True),  # each commit by a process that has read nothing: the weight so far is read from the ring
], ids=["30kb", "40kb-offloaded", "40kb-offloaded-cold-processes"])
async def test_big_commits_snapshot_sooner_on_every_store(backend: Backend, state_bytes: int, oldest: int,
                                                         cold: bool) -> None:
    """A big state in every commit: the deltas pass 96 KB at the fourth (30 KB) or third (40 KB) commit after a
    snapshot, so versions 1, 5, 9, ... (1, 4, 7, ...) are snapshots; at version 21 the ring (16) holds 6..21, and the
    oldest snapshot in it is 9 (7). The same whichever process commits (dormant.runtime.versions.snapshot_due)."""
    store = backend.store
    ref = await created(store, "big")
    seen = await apply_commits(store, ref, loop_commits(20, state_bytes=state_bytes),
                               through=backend.another_process if cold else None)
    kept = await store.retained_versions(ref)
    assert kept is not None
    assert max(seen) == 21 and [v.version for v in kept] == list(range(oldest, 22))
    for info in kept[:3]:
        old = await store.load_version(ref, info.version)
        assert old is not None and _same(old, seen[info.version])
