"""Counting actors per type and status, and the attention marks (actors that may need an operator while listed as
sleeping): the same contract on MemoryEventStore and on the DynamoDB store over DynamoDB Local, moto and dynalite;
what a count costs in requests on DynamoDB."""

from __future__ import annotations

import pytest

from dormant.dynamodb.store import DynamoEventStore
from dormant.errors import InvalidCursorError
from dormant.ports import ActorRef, EventStore
from dormant.workflow.history import WorkflowRecord, WorkflowState
from tests.integration.conftest import watch
from tests.integration.test_store_contract import T0, any_store, created, draft, meta

__all__ = ["any_store"]  # the fixture, imported to be used here


async def populated(store: EventStore) -> None:
    """counter: 3 failed, 1 sleeping (from running), 1 pending; other: 1 failed."""
    for key, state in {"a": WorkflowState.FAILED, "b": WorkflowState.FAILED, "c": WorkflowState.FAILED,
                       "d": WorkflowState.RUNNING, "e": None}.items():
        actor = await created(store, key)
        if state is not None:
            await store.commit(actor, 1, draft(workflow=WorkflowRecord(state=state), at=T0 + 2))
    other = ActorRef(name="other", key=("a",))
    await store.create(other, meta().model_copy(update={"name": "other", "key": ("a",)}), {}, WorkflowRecord(), [])
    await store.commit(other, 1, draft(workflow=WorkflowRecord(state=WorkflowState.FAILED)))


async def test_counts_per_type_and_status_stop_at_the_limit(any_store: EventStore) -> None:
    await populated(any_store)
    counts = {status.value: await any_store.count_actors("counter", status, limit=100)
              for status in (WorkflowState.FAILED, WorkflowState.SLEEPING, WorkflowState.PENDING,
                             WorkflowState.DIVERGED)}
    assert {s: (c.count, c.exact) for s, c in counts.items()} == {
        "failed": (3, True), "sleeping": (1, True), "pending": (1, True), "diverged": (0, True)}
    assert (await any_store.count_actors("other", WorkflowState.FAILED, limit=100)).count == 1
    assert (await any_store.count_actors("nobody", WorkflowState.FAILED, limit=100)).count == 0
    capped = await any_store.count_actors("counter", WorkflowState.FAILED, limit=2)
    assert (capped.count, capped.exact) == (2, False)
    exact = await any_store.count_actors("counter", WorkflowState.FAILED, limit=3)
    assert (exact.count, exact.exact) == (3, True)


async def test_a_count_is_one_select_count_query_per_status_on_dynamodb(store: DynamoEventStore) -> None:
    await populated(store)
    log = watch(store.client)
    await store.count_actors("counter", WorkflowState.FAILED, limit=1000)
    await store.count_actors("counter", WorkflowState.FAILED, limit=1)
    assert log.counts() == {"Query": 2}


async def test_attention_marks_are_listed_per_type_replaced_and_cleared(any_store: EventStore) -> None:
    for key in "abc":
        await created(any_store, key)
    a, b, c = (ActorRef(name="counter", key=(key, "x/y")) for key in "abc")
    other = ActorRef(name="other", key=("z",))
    await any_store.create(other, meta().model_copy(update={"name": "other", "key": ("z",)}), {}, WorkflowRecord(), [])
    assert (await any_store.list_attention("counter")).marks == []
    await any_store.mark_attention(c, "retry", T0 + 1)
    await any_store.mark_attention(a, "wake_error", T0 + 2)
    await any_store.mark_attention(other, "retry", T0 + 3)
    page = await any_store.list_attention("counter")
    assert [(m.key, m.reason, m.since) for m in page.marks] == [(a.key, "wake_error", T0 + 2), (c.key, "retry", T0 + 1)]
    assert page.cursor is None
    paged, cursor = [], None  # in pages, by actor id (DynamoDB may end with an empty page)
    for _ in range(5):
        found = await any_store.list_attention("counter", limit=1, after=cursor)
        assert len(found.marks) <= 1
        paged += [m.key for m in found.marks]
        cursor = found.cursor
        if cursor is None:
            break
    assert paged == [a.key, c.key]
    assert [m.name for m in (await any_store.list_attention("other")).marks] == ["other"]
    # a mark is replaced by the next one; a clear of an older mark leaves the newer one; a plain clear removes it
    await any_store.mark_attention(c, "wake_error", T0 + 5)
    await any_store.clear_attention(c, since=T0 + 1)
    assert [(m.key, m.reason) for m in (await any_store.list_attention("counter")).marks] == [
        (a.key, "wake_error"), (c.key, "wake_error")]
    await any_store.clear_attention(c, since=T0 + 5)
    await any_store.clear_attention(a)
    await any_store.clear_attention(b)  # never marked: nothing happens
    assert (await any_store.list_attention("counter")).marks == []
    # marks are no actors: the listing, the counts and deletion treat them as the actor's own items
    await any_store.mark_attention(a, "retry", T0 + 6)
    assert [s.key[0] for s in (await any_store.list_actors("counter")).actors] == ["a", "b", "c"]
    assert await any_store.delete(a)
    assert (await any_store.list_attention("counter")).marks == []


@pytest.mark.parametrize("cursor", ["", "garbage", "other/z", "counter/"])
async def test_an_attention_cursor_from_elsewhere_is_refused(any_store: EventStore, cursor: str) -> None:
    await created(any_store)
    with pytest.raises(InvalidCursorError, match="cursor"):
        await any_store.list_attention("counter", after=cursor)
