"""What the store's protocol costs in capacity units as DynamoDB reports them (DynamoDB Local applies AWS's rules,
indexes included: dormant.aws.metering), per step of an actor's life: the bill docs/performance.md's priced table is
made of, pinned here so that a protocol change shows what it moved (docs/storage.md, issue 29)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dormant.aws.metering import Meter, instrument
from dormant.dynamodb.store import DynamoEventStore
from dormant.ports import ActorMeta, ActorRef
from dormant.workflow.history import WorkflowRecord, WorkflowState
from tests.contract.support import T0, draft, message
from tests.integration.conftest import shared_session, store_settings


@pytest.fixture
async def metered(dynamodb_local_server: str) -> AsyncIterator[tuple[DynamoEventStore, Meter]]:
    async with DynamoEventStore.connect(store_settings(dynamodb_local_server), session=shared_session()) as store:
        await store.create_table()
        meter = Meter()
        instrument(store.client, always=meter, capacity=True)
        yield store, meter
        await store.client.delete_table(TableName=store.table)


def units(meter: Meter) -> tuple[float, float]:
    return meter.write_units, meter.index_write_units


async def test_a_commit_that_keeps_the_listed_status_costs_one_write_unit_and_no_index_unit(
        metered: tuple[DynamoEventStore, Meter]) -> None:
    store, meter = metered
    actor = ActorRef(name="counter", key=("a",))
    before = meter.copy()
    assert await store.create(actor, ActorMeta(name="counter", key=actor.key, created_at=T0), {"value": 0},
                              WorkflowRecord(), [])
    assert units(meter - before) == (2, 1)  # the commit item; the status item (`pending`) and its index entry
    before = meter.copy()
    await store.commit(actor, 1, draft(workflow=WorkflowRecord(state=WorkflowState.RUNNING), at=T0 + 1))
    assert units(meter - before) == (1, 0)  # mid-wake-up `running`: still listed `pending`, nothing moves
    before = meter.copy()
    await store.commit(actor, 2, draft(workflow=WorkflowRecord(state=WorkflowState.SLEEPING), at=T0 + 2))
    assert units(meter - before) == (2, 2)  # the wake-up's end: listed `sleeping`, the index key moved (2)
    for version, state in ((3, WorkflowState.RUNNING), (4, None), (5, WorkflowState.SLEEPING)):
        before = meter.copy()
        await store.commit(actor, version, draft(workflow=WorkflowRecord(state=state) if state else None,
                                                 state={"value": version}, at=T0 + version))
        assert units(meter - before) == (1, 0), state  # the commit item alone: the listing does not move
    before = meter.copy()
    await store.commit(actor, 6, draft(workflow=WorkflowRecord(state=WorkflowState.COMPLETED), at=T0 + 9))
    assert units(meter - before) == (2, 2)


async def test_what_a_consumed_message_costs_over_a_lap_of_the_ring(metered: tuple[DynamoEventStore, Meter]) -> None:
    """One message per commit over a lap of the ring (16 commits, the last a snapshot that writes the lap's
    tombstones): per message its inbox item and its `pending` index entry, the commit, and the tombstone, which
    takes the entry out of the index again. The floor (docs/performance.md) is 1 inbox write and 1 commit."""
    store, meter = metered
    actor = ActorRef(name="counter", key=("a",))
    assert await store.create(actor, ActorMeta(name="counter", key=actor.key, created_at=T0), {"value": 0},
                              WorkflowRecord(state=WorkflowState.SLEEPING), [])
    lap = store.settings.snapshot_every
    before = meter.copy()
    version = 1
    for index in range(lap):
        assert await store.enqueue(actor, message(f"m{index}"))
        loaded = await store.load(actor)
        assert loaded is not None and [m.id for m in loaded.inbox] == [f"m{index}"]
        version = await store.commit(actor, version, draft(state={"value": index}, consumed=[f"m{index}"],
                                                           at=T0 + index + 1))
    spent = meter - before
    tombstoned = lap - 1  # the snapshot commit tombstones the lap's earlier messages; its own wait for the next
    assert units(spent) == (2 * lap + tombstoned, lap + tombstoned)
    assert spent.calls["dynamodb.Query"] == 2 * lap  # a load: the ring and the `pending` index
