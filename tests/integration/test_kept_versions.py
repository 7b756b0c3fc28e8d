"""The versions the DynamoDB store keeps for fork and reset (dormant.runtime.versions): another process reads the same,
and what reading them costs. That every backend keeps the same versions, each read back exactly as the actor was, is
tests/contract/test_versions.py's."""

from __future__ import annotations

from dormant.dynamodb.store import DynamoEventStore
from tests.contract.support import apply_commits, created, loop_commits
from tests.integration.conftest import shared_session, watch


async def test_another_process_reads_the_same_kept_versions(store: DynamoEventStore) -> None:
    ref = await created(store, "cold")
    await apply_commits(store, ref, loop_commits(20))
    kept = await store.retained_versions(ref)
    async with DynamoEventStore.connect(store.settings, session=shared_session()) as other:  # nothing cached
        assert await other.retained_versions(ref) == kept


async def test_listing_kept_versions_or_loading_one_is_one_query_of_the_ring(store: DynamoEventStore) -> None:
    ref = await created(store, "cost")
    await apply_commits(store, ref, loop_commits(20))
    log = watch(store.client)
    kept = await store.retained_versions(ref)
    assert kept is not None
    await store.load_version(ref, kept[0].version)
    assert log.counts() == {"Query": 2}
