"""Search attributes in the stores: the same searches give the same actors, in the same order, on MemoryEventStore
(the reference) and on the DynamoDB store over DynamoDB Local, moto and dynalite; on DynamoDB a search is Queries of
the `search` index (never a Scan), a commit that changes no attribute writes nothing more, and the derived index
items survive a crash between the commit and their writes (the next load settles them)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from dormant.core.search import TYPE_CODES, parse_conditions, stored_value
from dormant.core.searchplan import SearchPlan, plan_search
from dormant.dynamodb import search as aws_search
from dormant.dynamodb.store import DynamoEventStore
from dormant.errors import InvalidCursorError, StorageError
from dormant.memory.store import MemoryEventStore
from dormant.ports import ActorMeta, ActorRef, EventStore
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import WorkflowRecord, WorkflowState
from tests.integration.conftest import server_for, shared_session, store_settings, watch

T0 = 1_767_225_600.0
TYPE = "order"
DECLARED = {"customer": "s", "amount": "i", "score": "f", "vip": "b", "due": "t"}


@pytest.fixture(params=["memory", "dynamodb_local", "moto", "dynalite"])
async def any_store(request: pytest.FixtureRequest) -> AsyncIterator[EventStore]:
    if request.param == "memory":
        yield MemoryEventStore()
        return
    server = server_for(request, request.param)
    async with DynamoEventStore.connect(store_settings(server.endpoint), session=shared_session()) as store:
        await store.create_table()
        yield store
    server.reset()


def ref(key: str) -> ActorRef:
    return ActorRef(name=TYPE, key=(key,))


def attributes(**values: Any) -> dict[str, Any]:
    """name -> [type code, JSON value] (None: unset), as steps' changes reach the store."""
    return {name: None if value is None else [DECLARED[name], stored_value(DECLARED[name], value)]
            for name, value in values.items()}


def draft(*, search: dict[str, Any] | None = None, state: WorkflowState | None = None, at: float = T0 + 1
          ) -> CommitDraft:
    return CommitDraft(upserts=[], deleted_prefixes=[], state=None, consumed_ids=[], responses={}, events=[],
                       workflow=WorkflowRecord(state=state) if state else None, committed_at=at, search=search)


async def make(store: EventStore, key: str, **values: Any) -> ActorRef:
    actor = ref(key)
    assert await store.create(actor, ActorMeta(name=TYPE, key=actor.key, created_at=T0), {}, WorkflowRecord(), [],
                              search={k: v for k, v in attributes(**values).items() if v is not None})
    return actor


def where(*texts: str, declared: dict[str, str] = DECLARED) -> SearchPlan:
    return plan_search(TYPE, parse_conditions(TYPE, declared, texts))


async def found(store: EventStore, *texts: str, status: WorkflowState | None = None, limit: int = 100) -> list[str]:
    """The keys every page of the search gives, in order."""
    keys: list[str] = []
    cursor: str | None = None
    plan = where(*texts)
    for _ in range(100):
        page = await store.search_actors(plan, status=status, limit=limit, after=cursor)
        keys += [summary.key[0] for summary in page.actors]
        if page.cursor is None:
            return keys
        cursor = page.cursor
    raise AssertionError("the pages never ended")


async def shop(store: EventStore) -> None:
    await make(store, "a", customer="42", amount=120, score=-1.5, vip=True)
    await make(store, "b", customer="42", amount=80, score=2.25, vip=False)
    await make(store, "c", customer="7", amount=100, score=0.0, vip=True, due=datetime(2026, 3, 1, tzinfo=UTC))
    await make(store, "d", customer="420", amount=-5, score=1e10, vip=False,
               due=datetime(2025, 12, 31, 23, 0, tzinfo=UTC))
    await make(store, "e")  # no attributes: never found


async def test_conditions_find_the_matching_actors_in_value_order(any_store: EventStore) -> None:
    await shop(any_store)
    assert sorted(await found(any_store, "customer=42")) == ["a", "b"]
    assert await found(any_store, "amount>=80") == ["b", "c", "a"]
    assert await found(any_store, "amount<100") == ["d", "b"]
    assert await found(any_store, "amount>80", "amount<=120") == ["c", "a"]
    assert await found(any_store, "amount=100") == ["c"]
    assert sorted((await found(any_store, "customer^=42"))[:2]) == ["a", "b"]
    assert (await found(any_store, "customer^=42"))[2:] == ["d"]
    assert await found(any_store, "score>-2") == ["a", "c", "b", "d"]
    assert await found(any_store, "score<=0") == ["a", "c"]
    assert sorted(await found(any_store, "vip=true")) == ["a", "c"]
    assert await found(any_store, "due<2026-01-01") == ["d"]  # 2025-12-31T23:00Z; no offset is UTC
    assert await found(any_store, "due>=2025-12-31T23:30:00-01:00") == ["c"]  # 00:30Z
    assert await found(any_store, "amount>100", "amount<100") == []  # contradictory: nothing read
    assert await found(any_store, "customer=42", "amount>100") == ["a"]  # the others filter on the copy
    assert await found(any_store, "vip=true", "amount<=100") == ["c"]
    assert await found(any_store, "customer^=", "due>2000-01-01") == ["d", "c"]  # empty prefix: every customer


async def test_pages_follow_the_cursor_with_and_without_filters(any_store: EventStore) -> None:
    for number in range(12):
        await make(any_store, f"k{number:02}", amount=number * 10 - 30, vip=number % 3 == 0)
    everyone = [f"k{number:02}" for number in range(12)]
    assert await found(any_store, "amount>=-1000", limit=5) == everyone
    flagged = await found(any_store, "amount>-1000", "vip=true", limit=2)  # read by vip, in the actors' hash order
    assert sorted(flagged) == ["k00", "k03", "k06", "k09"] and len(flagged) == 4
    assert await found(any_store, "amount>-1000", "amount<1000", "vip=true", limit=2) == ["k00", "k03", "k06", "k09"]
    first = await any_store.search_actors(where("amount>=0"), limit=3)
    assert [s.key[0] for s in first.actors] == ["k03", "k04", "k05"] and first.cursor is not None
    assert first.actors[0].attributes == {"amount": 0, "vip": True} and first.actors[0].status is WorkflowState.PENDING
    second = await any_store.search_actors(where("amount>=0"), limit=3, after=first.cursor)
    assert [s.key[0] for s in second.actors] == ["k06", "k07", "k08"]


async def test_cursors_of_other_searches_are_refused(any_store: EventStore) -> None:
    for number in range(3):
        await make(any_store, f"k{number}", amount=number, customer=str(number))
    page = await any_store.search_actors(where("amount>=0"), limit=1)
    assert page.cursor is not None
    for other, cursor in [(where("customer^="), page.cursor), (where("amount>=0"), "not json"),
                          (where("amount>=0"), '["amount", "zz!0000000000000000", "order/k0"]'),
                          (where("amount>=0"), page.cursor.replace("order/", "other/")),
                          (where("amount>=5"), page.cursor)]:  # a key outside the range searched
        with pytest.raises(InvalidCursorError):
            await any_store.search_actors(other, limit=1, after=cursor)


async def test_changes_and_unsets_move_the_actor_and_its_copies_follow(any_store: EventStore) -> None:
    actor = await make(any_store, "a", customer="42", amount=10)
    await make(any_store, "b", customer="42", amount=20)
    version = await any_store.commit(actor, 1, draft(search=attributes(amount=200)))
    assert await found(any_store, "amount<100") == ["b"]
    assert await found(any_store, "amount>100") == ["a"]
    # The copy on the customer item follows: the amount condition filters on it.
    assert await found(any_store, "customer=42", "amount>100") == ["a"]
    version = await any_store.commit(actor, version, draft(search=attributes(customer=None)))
    assert await found(any_store, "customer=42") == ["b"]
    page = await any_store.search_actors(where("amount>100"))
    assert page.actors[0].attributes == {"amount": 200} and page.actors[0].version == version
    snapshot = await any_store.load(actor)
    assert snapshot is not None and snapshot.search == {"amount": ["i", 200]}
    version = await any_store.commit(actor, version, draft(search=attributes(amount=None)))
    assert await found(any_store, "amount>=0") == ["b"]
    assert await found(any_store, "customer^=") == ["b"]


async def test_the_listed_status_rides_on_the_items_and_counts_per_status(any_store: EventStore) -> None:
    for number in range(6):
        await make(any_store, f"k{number}", amount=number)
    for number in (1, 2, 3):
        await any_store.commit(ref(f"k{number}"), 1, draft(state=WorkflowState.SLEEPING))
    await any_store.commit(ref("k4"), 1, draft(state=WorkflowState.FAILED))
    await any_store.commit(ref("k1"), 2, draft(state=WorkflowState.RUNNING))  # listed as sleeping: nothing moves
    assert await found(any_store, "amount>=0", status=WorkflowState.SLEEPING) == ["k1", "k2", "k3"]
    assert await found(any_store, "amount>=2", status=WorkflowState.FAILED) == ["k4"]
    assert await found(any_store, "amount>=2", status=WorkflowState.PENDING, limit=1) == ["k5"]
    counted = await any_store.count_matches(where("amount>=0"), limit=100)
    assert counted.counts == {"pending": 2, "sleeping": 3, "failed": 1} and counted.exact
    cut = await any_store.count_matches(where("amount>=0"), limit=4)  # the first four in value order
    assert cut.counts == {"pending": 1, "sleeping": 3} and not cut.exact
    assert (await any_store.count_matches(where("amount>=0"), limit=6)).exact
    assert (await any_store.count_matches(where("amount>9"), limit=6)).counts == {}


async def test_deleting_an_actor_takes_its_attributes_and_a_new_life_starts_without(any_store: EventStore) -> None:
    actor = await make(any_store, "a", customer="42")
    assert await any_store.delete(actor)
    assert await found(any_store, "customer=42") == []
    assert await any_store.create(actor, ActorMeta(name=TYPE, key=actor.key, created_at=T0), {}, WorkflowRecord(), [])
    assert await found(any_store, "customer=42") == []
    snapshot = await any_store.load(actor)
    assert snapshot is not None and snapshot.search == {}


async def test_a_retyped_attribute_is_searched_apart_from_its_old_values(any_store: EventStore) -> None:
    await make(any_store, "a", amount=5)
    assert await found(any_store, "amount>=0") == ["a"]
    retyped = where("amount>=0", declared={**DECLARED, "amount": "f"})  # a deploy made it a float
    assert (await any_store.search_actors(retyped)).actors == []


# -- DynamoDB only -------------------------------------------------------------------------------------------------
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
