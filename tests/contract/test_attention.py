"""Attention marks (actors that may need an operator while listed as sleeping): marked, replaced, cleared, listed per
type in pages, and gone with their actor, on every backend."""

from __future__ import annotations

import pytest

from dormant.errors import InvalidCursorError
from dormant.ports import ActorRef, EventStore
from dormant.workflow.history import WorkflowRecord
from tests.contract.support import T0, created, meta


async def test_attention_marks_are_listed_per_type_replaced_and_cleared(store: EventStore) -> None:
    for key in "abc":
        await created(store, key)
    a, b, c = (ActorRef(name="counter", key=(key, "x/y")) for key in "abc")
    other = ActorRef(name="other", key=("z",))
    await store.create(other, meta().model_copy(update={"name": "other", "key": ("z",)}), {}, WorkflowRecord(), [])
    assert (await store.list_attention("counter")).marks == []
    await store.mark_attention(c, "retry", T0 + 1)
    await store.mark_attention(a, "wake_error", T0 + 2)
    await store.mark_attention(other, "retry", T0 + 3)
    page = await store.list_attention("counter")
    assert [(m.key, m.reason, m.since) for m in page.marks] == [(a.key, "wake_error", T0 + 2), (c.key, "retry", T0 + 1)]
    assert page.cursor is None
    paged, cursor = [], None  # in pages, by actor id (DynamoDB may end with an empty page)
    for _ in range(5):
        found = await store.list_attention("counter", limit=1, after=cursor)
        assert len(found.marks) <= 1
        paged += [m.key for m in found.marks]
        cursor = found.cursor
        if cursor is None:
            break
    assert paged == [a.key, c.key]
    assert [m.name for m in (await store.list_attention("other")).marks] == ["other"]
    # a mark is replaced by the next one; a clear of an older mark leaves the newer one; a plain clear removes it
    await store.mark_attention(c, "wake_error", T0 + 5)
    await store.clear_attention(c, since=T0 + 1)
    assert [(m.key, m.reason) for m in (await store.list_attention("counter")).marks] == [
        (a.key, "wake_error"), (c.key, "wake_error")]
    await store.clear_attention(c, since=T0 + 5)
    await store.clear_attention(a)
    await store.clear_attention(b)  # never marked: nothing happens
    assert (await store.list_attention("counter")).marks == []
    # marks are no actors: the listing, the counts and deletion treat them as the actor's own items
    await store.mark_attention(a, "retry", T0 + 6)
    assert [s.key[0] for s in (await store.list_actors("counter")).actors] == ["a", "b", "c"]
    assert await store.delete(a)
    assert (await store.list_attention("counter")).marks == []


@pytest.mark.parametrize("cursor", ["", "garbage", "other/z", "counter/"])
async def test_an_attention_cursor_from_elsewhere_is_refused(store: EventStore, cursor: str) -> None:
    await created(store)
    with pytest.raises(InvalidCursorError, match="cursor"):
        await store.list_attention("counter", after=cursor)
