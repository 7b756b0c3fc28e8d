"""Search attributes on the DynamoDB store: a search is Queries of the `search` index (never a Scan), a commit that
changes no attribute writes nothing more, and the derived index items survive a crash between the commit and their
writes (the next load settles them). What a search finds, on every backend, is tests/contract/test_search.py's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from dormant.core.search import TYPE_CODES, parse_conditions
from dormant.core.searchplan import plan_search
from dormant.dynamodb import search as aws_search
from dormant.dynamodb.store import DynamoEventStore
from dormant.errors import StorageError
from dormant.ports import ActorMeta, ActorRef
from dormant.workflow.history import WorkflowRecord, WorkflowState
from tests.contract.support import SEARCHED as TYPE
from tests.contract.support import T0, attributes, found, where
from tests.contract.support import make_order as make
from tests.contract.support import search_draft as draft
from tests.integration.conftest import server_for, shared_session, store_settings, watch


@pytest.fixture(params=["dynamodb_local", "moto"])
async def dynamo(request: pytest.FixtureRequest) -> AsyncIterator[DynamoEventStore]:
    server = server_for(request, request.param)
    async with DynamoEventStore.connect(store_settings(server.endpoint), session=shared_session()) as store:
        await store.create_table()
        yield store
    server.reset()


async def test_only_a_change_writes_the_items_and_a_search_is_index_queries(dynamo: DynamoEventStore) -> None:
    actor = await make(dynamo, "a", customer="42", amount=1, vip=True)
    log = watch(dynamo.client)
    version = await dynamo.commit(actor, 1, draft())
    version = await dynamo.commit(actor, version, draft(search=attributes(amount=1)))  # the same value again
    assert log.counts() == {"PutItem": 2}  # one commit item each, nothing more
    log.clear()
    version = await dynamo.commit(actor, version, draft(search=attributes(amount=2)))
    assert log.counts() == {"PutItem": 4}  # the commit, then the three items (each carries every attribute)
    log.clear()
    queries: list[dict[str, Any]] = []
    dynamo.client.meta.events.register("provide-client-params.dynamodb.Query",
                                       lambda params, **_: queries.append(dict(params)))
    assert await found(dynamo, "customer=42", "amount>1") == ["a"]
    assert (await dynamo.count_matches(where("vip=true"), limit=10)).counts == {"pending": 1}
    assert log.counts() == {"Query": 2}
    assert {q["IndexName"] for q in queries} == {"search"} and "Scan" not in log.calls


async def test_a_crash_before_the_items_is_settled_by_the_next_load(dynamo: DynamoEventStore,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    actor = await make(dynamo, "a", amount=1)
    settle = aws_search.SearchItems.settle
    crashed: list[int] = []

    async def crash(items: aws_search.SearchItems, target: ActorRef, head: Any, found_keys: set[str]) -> int:
        if not crashed:
            crashed.append(head.version)
            raise StorageError("the process died after its commit item")
        return await settle(items, target, head, found_keys)

    monkeypatch.setattr(aws_search.SearchItems, "settle", crash)
    with pytest.raises(StorageError):
        await dynamo.commit(actor, 1, draft(search=attributes(amount=50, customer="late")))
    assert crashed == [2]
    assert await found(dynamo, "amount>10") == [] and await found(dynamo, "amount<10") == ["a"]  # behind
    other = DynamoEventStore(dynamo.client, dynamo.settings)  # another process: it has settled nothing
    snapshot = await other.load(actor)
    assert snapshot is not None and snapshot.version == 2
    assert await found(dynamo, "amount>10") == ["a"] and await found(dynamo, "amount<10") == []
    assert await found(dynamo, "customer=late") == ["a"]


async def test_a_late_settle_of_an_older_version_never_wins(dynamo: DynamoEventStore) -> None:
    actor = await make(dynamo, "a", amount=1, customer="x")
    await dynamo.commit(actor, 1, draft(search=attributes(amount=2)))
    old = dynamo.heads.get(actor, 2)
    assert old is not None
    await dynamo.commit(actor, 2, draft(search=attributes(amount=3, customer=None)))
    assert await dynamo.search_items.settle(actor, old, set()) == 2  # tried both, both refused by their conditions
    assert await found(dynamo, "amount=3") == ["a"] and await found(dynamo, "amount=2") == []
    assert await found(dynamo, "customer=x") == []  # the tombstone keeps an unset attribute out


@pytest.mark.parametrize("server", ["dynamodb_local"])
async def test_the_longest_values_and_ids_fit_the_index_keys(server: str, request: pytest.FixtureRequest) -> None:
    """DynamoDB Local checks index key sizes as DynamoDB does (1,024 bytes per sort key, 2,048 per partition key)."""
    process = server_for(request, server)
    async with DynamoEventStore.connect(store_settings(process.endpoint), session=shared_session()) as store:
        await store.create_table()
        many = {f"s{index:02}_{'x' * 58}": str for index in range(20)}  # 20 names of 64 characters
        declared = {name: TYPE_CODES[kind] for name, kind in many.items()}
        longest = ActorRef(name=TYPE, key=("k" * 500, "é" * 84))  # a 1,011-byte id
        text = "\U0001f600" * 64  # 256 bytes of 4-byte characters: a 512-digit encoding
        search = {name: ["s", text] for name in declared}
        assert await store.create(longest, ActorMeta(name=TYPE, key=longest.key, created_at=T0), {},
                                  WorkflowRecord(), [], search=search)
        plan = plan_search(TYPE, parse_conditions(TYPE, declared, [f"{next(iter(declared))}={text}"]))
        page = await store.search_actors(plan)
        assert [summary.key for summary in page.actors] == [longest.key]
        assert page.actors[0].attributes == {name: text for name in declared}
    process.reset()


@pytest.mark.parametrize("server", ["dynamodb_local"])
async def test_what_an_attribute_write_costs_as_dynamodb_reports_it(server: str, request: pytest.FixtureRequest
                                                                   ) -> None:
    """The numbers of docs/storage.md ("Search attributes"), as DynamoDB Local reports consumed capacity (indexes
    included): an actor with k attributes pays k item writes on the table when one changes, and on the index one unit
    per item plus one per value that moved; nothing when no attribute (and no listed status) changed."""
    from dormant.aws.metering import instrument, metering

    process = server_for(request, server)
    async with DynamoEventStore.connect(store_settings(process.endpoint), session=shared_session()) as store:
        await store.create_table()
        instrument(store.client, capacity=True)
        actor = await make(store, "a", customer="42", amount=1, due=datetime(2026, 1, 1, tzinfo=UTC))
        costs = []
        version = 1
        for change in (draft(), draft(search=attributes(amount=1)), draft(search=attributes(amount=2)),
                       draft(state=WorkflowState.SLEEPING), draft(search=attributes(due=None))):
            with metering() as meter:
                version = await store.commit(actor, version, change)
            costs.append((meter.requests["dynamodb.PutItem"], meter.write_units, meter.index_write_units))
        assert costs == [(1, 1, 0), (1, 1, 0),  # nothing searchable changed: the commit alone
                         (4, 4, 4),  # one of three moved: 3 items, each 1 on the index, +1 for the moved key
                         (5, 5, 5),  # the status moved: the status item (its key moved: 2) and the 3 copies
                         (4, 4, 3)]  # one unset: 2 items and a tombstone (its index entry deleted)
        with metering() as meter:
            await store.search_actors(where("customer=42"))
        assert meter.requests == {"dynamodb.Query": 1} and meter.read_units == 0.5
    process.reset()


@pytest.mark.parametrize("server", ["dynamodb_local", "moto"])
async def test_a_table_of_an_earlier_release_gets_the_index_it_lacks(server: str, request: pytest.FixtureRequest
                                                                    ) -> None:
    """A `dormant dev` data directory made before the `search` index existed: create_table adds it (as a stack
    update does), and the actors stored before are found once their items are there."""
    from dormant.dynamodb.table import table_definition

    process = server_for(request, server)
    async with DynamoEventStore.connect(store_settings(process.endpoint), session=shared_session()) as store:
        old = table_definition(store.table)
        old["GlobalSecondaryIndexes"] = [i for i in old["GlobalSecondaryIndexes"] if i["IndexName"] != "search"]
        old["AttributeDefinitions"] = [a for a in old["AttributeDefinitions"] if a["AttributeName"] not in ("xk", "xv")]
        await store.client.create_table(**old)
        await make(store, "a", customer="42")  # its item is written; there is no index to find it yet
        await store.create_table()
        described = (await store.client.describe_table(TableName=store.table))["Table"]
        assert {i["IndexName"] for i in described["GlobalSecondaryIndexes"]} == {"status", "search"}
        assert await found(store, "customer=42") == ["a"]
        await store.create_table()  # again: nothing to add
    process.reset()
