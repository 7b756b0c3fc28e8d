"""Search attributes: the same searches give the same actors, in the same order, in pages, with counts per listed
status, on every backend; attributes change, unset, go with a deleted actor and are searched apart when retyped. How
the DynamoDB store reads and writes its `search` index (Queries, never a Scan; what a write costs; a crash before the
index items) is in tests/integration/test_search.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dormant.errors import InvalidCursorError
from dormant.ports import ActorMeta, EventStore
from dormant.workflow.history import WorkflowRecord, WorkflowState
from tests.contract.support import (
    DECLARED,
    SEARCHED,
    T0,
    attributes,
    found,
    make_order,
    order,
    search_draft,
    where,
)


async def shop(store: EventStore) -> None:
    await make_order(store, "a", customer="42", amount=120, score=-1.5, vip=True)
    await make_order(store, "b", customer="42", amount=80, score=2.25, vip=False)
    await make_order(store, "c", customer="7", amount=100, score=0.0, vip=True, due=datetime(2026, 3, 1, tzinfo=UTC))
    await make_order(store, "d", customer="420", amount=-5, score=1e10, vip=False,
                     due=datetime(2025, 12, 31, 23, 0, tzinfo=UTC))
    await make_order(store, "e")  # no attributes: never found


async def test_conditions_find_the_matching_actors_in_value_order(store: EventStore) -> None:
    await shop(store)
    assert sorted(await found(store, "customer=42")) == ["a", "b"]
    assert await found(store, "amount>=80") == ["b", "c", "a"]
    assert await found(store, "amount<100") == ["d", "b"]
    assert await found(store, "amount>80", "amount<=120") == ["c", "a"]
    assert await found(store, "amount=100") == ["c"]
    assert sorted((await found(store, "customer^=42"))[:2]) == ["a", "b"]
    assert (await found(store, "customer^=42"))[2:] == ["d"]
    assert await found(store, "score>-2") == ["a", "c", "b", "d"]
    assert await found(store, "score<=0") == ["a", "c"]
    assert sorted(await found(store, "vip=true")) == ["a", "c"]
    assert await found(store, "due<2026-01-01") == ["d"]  # 2025-12-31T23:00Z; no offset is UTC
    assert await found(store, "due>=2025-12-31T23:30:00-01:00") == ["c"]  # 00:30Z
    assert await found(store, "amount>100", "amount<100") == []  # contradictory: nothing read
    assert await found(store, "customer=42", "amount>100") == ["a"]  # the others filter on the copy
    assert await found(store, "vip=true", "amount<=100") == ["c"]
    assert await found(store, "customer^=", "due>2000-01-01") == ["d", "c"]  # empty prefix: every customer


async def test_pages_follow_the_cursor_with_and_without_filters(store: EventStore) -> None:
    for number in range(12):
        await make_order(store, f"k{number:02}", amount=number * 10 - 30, vip=number % 3 == 0)
    everyone = [f"k{number:02}" for number in range(12)]
    assert await found(store, "amount>=-1000", limit=5) == everyone
    flagged = await found(store, "amount>-1000", "vip=true", limit=2)  # read by vip, in the actors' hash order
    assert sorted(flagged) == ["k00", "k03", "k06", "k09"] and len(flagged) == 4
    assert await found(store, "amount>-1000", "amount<1000", "vip=true", limit=2) == ["k00", "k03", "k06", "k09"]
    first = await store.search_actors(where("amount>=0"), limit=3)
    assert [s.key[0] for s in first.actors] == ["k03", "k04", "k05"] and first.cursor is not None
    assert first.actors[0].attributes == {"amount": 0, "vip": True} and first.actors[0].status is WorkflowState.PENDING
    second = await store.search_actors(where("amount>=0"), limit=3, after=first.cursor)
    assert [s.key[0] for s in second.actors] == ["k06", "k07", "k08"]


async def test_cursors_of_other_searches_are_refused(store: EventStore) -> None:
    for number in range(3):
        await make_order(store, f"k{number}", amount=number, customer=str(number))
    page = await store.search_actors(where("amount>=0"), limit=1)
    assert page.cursor is not None
    for other, cursor in [(where("customer^="), page.cursor), (where("amount>=0"), "not json"),
                          (where("amount>=0"), '["amount", "zz!0000000000000000", "order/k0"]'),
                          (where("amount>=0"), page.cursor.replace("order/", "other/")),
                          (where("amount>=5"), page.cursor)]:  # a key outside the range searched
        with pytest.raises(InvalidCursorError):
            await store.search_actors(other, limit=1, after=cursor)


async def test_changes_and_unsets_move_the_actor_and_its_copies_follow(store: EventStore) -> None:
    actor = await make_order(store, "a", customer="42", amount=10)
    await make_order(store, "b", customer="42", amount=20)
    version = await store.commit(actor, 1, search_draft(search=attributes(amount=200)))
    assert await found(store, "amount<100") == ["b"]
    assert await found(store, "amount>100") == ["a"]
    # The copy on the customer item follows: the amount condition filters on it.
    assert await found(store, "customer=42", "amount>100") == ["a"]
    version = await store.commit(actor, version, search_draft(search=attributes(customer=None)))
    assert await found(store, "customer=42") == ["b"]
    page = await store.search_actors(where("amount>100"))
    assert page.actors[0].attributes == {"amount": 200} and page.actors[0].version == version
    snapshot = await store.load(actor)
    assert snapshot is not None and snapshot.search == {"amount": ["i", 200]}
    version = await store.commit(actor, version, search_draft(search=attributes(amount=None)))
    assert await found(store, "amount>=0") == ["b"]
    assert await found(store, "customer^=") == ["b"]


async def test_the_listed_status_rides_on_the_items_and_counts_per_status(store: EventStore) -> None:
    for number in range(6):
        await make_order(store, f"k{number}", amount=number)
    for number in (1, 2, 3):
        await store.commit(order(f"k{number}"), 1, search_draft(state=WorkflowState.SLEEPING))
    await store.commit(order("k4"), 1, search_draft(state=WorkflowState.FAILED))
    await store.commit(order("k1"), 2, search_draft(state=WorkflowState.RUNNING))  # listed as sleeping: nothing moves
    assert await found(store, "amount>=0", status=WorkflowState.SLEEPING) == ["k1", "k2", "k3"]
    assert await found(store, "amount>=2", status=WorkflowState.FAILED) == ["k4"]
    assert await found(store, "amount>=2", status=WorkflowState.PENDING, limit=1) == ["k5"]
    counted = await store.count_matches(where("amount>=0"), limit=100)
    assert counted.counts == {"pending": 2, "sleeping": 3, "failed": 1} and counted.exact
    cut = await store.count_matches(where("amount>=0"), limit=4)  # the first four in value order
    assert cut.counts == {"pending": 1, "sleeping": 3} and not cut.exact
    assert (await store.count_matches(where("amount>=0"), limit=6)).exact
    assert (await store.count_matches(where("amount>9"), limit=6)).counts == {}


async def test_deleting_an_actor_takes_its_attributes_and_a_new_life_starts_without(store: EventStore) -> None:
    actor = await make_order(store, "a", customer="42")
    assert await store.delete(actor)
    assert await found(store, "customer=42") == []
    assert await store.create(actor, ActorMeta(name=SEARCHED, key=actor.key, created_at=T0), {}, WorkflowRecord(), [])
    assert await found(store, "customer=42") == []
    snapshot = await store.load(actor)
    assert snapshot is not None and snapshot.search == {}


async def test_a_retyped_attribute_is_searched_apart_from_its_old_values(store: EventStore) -> None:
    await make_order(store, "a", amount=5)
    assert await found(store, "amount>=0") == ["a"]
    retyped = where("amount>=0", declared={**DECLARED, "amount": "f"})  # a deploy made it a float
    assert (await store.search_actors(retyped)).actors == []
