"""What counting actors costs on DynamoDB: one Select=COUNT Query per status. What counts and attention marks are, on
every backend, is tests/contract/test_listing.py's and test_attention.py's."""

from __future__ import annotations

from dormant.dynamodb.store import DynamoEventStore
from dormant.workflow.history import WorkflowState
from tests.contract.support import populated
from tests.integration.conftest import watch


async def test_a_count_is_one_select_count_query_per_status_on_dynamodb(store: DynamoEventStore) -> None:
    await populated(store)
    log = watch(store.client)
    await store.count_actors("counter", WorkflowState.FAILED, limit=1000)
    await store.count_actors("counter", WorkflowState.FAILED, limit=1)
    assert log.counts() == {"Query": 2}
