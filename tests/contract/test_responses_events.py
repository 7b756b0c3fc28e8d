"""Responses to completable messages (wait_response) and broadcast events (read_events, wait_events), visible once
the commit that made them is, on every backend."""

from __future__ import annotations

import asyncio

from dormant.ports import EventStore
from dormant.workflow.history import WorkflowRecord
from tests.contract.support import T0, created, draft, message, meta, ref


async def test_responses_visible_after_the_commit(store: EventStore) -> None:
    actor = await created(store)
    await store.enqueue(actor, message("ask"))
    assert await store.wait_response(actor, "ask", 0.05) == (False, None)
    waiter = asyncio.ensure_future(store.wait_response(actor, "ask", 30.0))
    await asyncio.sleep(0)  # let it begin (the answer reaches it whether it began before the commit or not)
    await store.commit(actor, 1, draft(consumed=["ask"], responses={"ask": {"answer": [42, "x"]}}))
    assert await waiter == (True, {"answer": [42, "x"]})
    assert await store.wait_response(actor, "ask", 0.0) == (True, {"answer": [42, "x"]})
    assert await store.wait_response(actor, "never-sent", 0.05) == (False, None)
    assert await store.wait_response(ref("nobody"), "ask", 0.0) == (False, None)


async def test_a_commit_answers_several_messages_and_a_null_answer_is_an_answer(store: EventStore) -> None:
    actor = await created(store)
    for mid in ("a", "b", "c"):
        await store.enqueue(actor, message(mid))
    await store.commit(actor, 1, draft(consumed=["a", "b"], responses={"a": None, "b": "plain"}))
    assert await store.wait_response(actor, "a", 0.0) == (True, None)
    assert await store.wait_response(actor, "b", 0.0) == (True, "plain")
    assert await store.wait_response(actor, "c", 0.0) == (False, None)


async def test_events_in_order_with_cursor_and_limit(store: EventStore) -> None:
    actor = ref()
    assert await store.create(actor, meta(), {}, WorkflowRecord(), [("e", 1), ("e", 2)])
    assert await store.wait_events(actor, 2, 0.05) == []
    waiter = asyncio.ensure_future(store.wait_events(actor, 2, 30.0))
    await asyncio.sleep(0)  # let it begin (the events reach it whether it began before the commit or not)
    await store.commit(actor, 1, draft(events=[("e", 3), ("f", {"k": 4}), ("e", 5)], at=T0 + 7))
    assert [(e.seq, e.name, e.payload, e.at) for e in await waiter] == [
        (3, "e", 3, T0 + 7), (4, "f", {"k": 4}, T0 + 7), (5, "e", 5, T0 + 7)]
    await store.commit(actor, 2, draft(state={"x": 1}))  # no events
    await store.commit(actor, 3, draft(events=[("e", 6)]))
    everything = await store.read_events(actor, 0, 100)
    assert [e.seq for e in everything] == [1, 2, 3, 4, 5, 6] and [e.payload for e in everything][-1] == 6
    assert [e.seq for e in await store.read_events(actor, 3, 2)] == [4, 5]  # mid-commit cursor, limit
    assert [e.seq for e in await store.read_events(actor, 6, 10)] == []
    assert [e.seq for e in await store.wait_events(actor, 4, 0.0)] == [5, 6]  # there already: no wait
    assert await store.read_events(ref("nobody"), 0, 10) == []
    assert await store.wait_events(ref("nobody"), 0, 0.05) == []
