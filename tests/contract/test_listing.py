"""Listing actors by type and status (list_actors, read_summary), in pages with cursors, and counting them
(count_actors), on every backend. What a listing or a count costs in DynamoDB requests is in
tests/integration/test_listing_and_deletion.py and test_counts_and_attention.py."""

from __future__ import annotations

import pytest

from dormant.errors import InvalidCursorError
from dormant.ports import ActorRef, EventStore
from dormant.workflow.history import WorkflowRecord, WorkflowState
from tests.contract.support import T0, created, draft, meta, populated, record, ref


async def listing(store: EventStore, actor_type: str, status: WorkflowState | None = None,
                  limit: int = 100) -> list[tuple[str, str]]:
    """Every (first key part, status) of a listing, following its cursors; no actor twice."""
    seen: list[tuple[str, str]] = []
    cursor = None
    for _ in range(50):
        page = await store.list_actors(actor_type, status=status, limit=limit, after=cursor)
        assert len(page.actors) <= limit
        seen += [(summary.key[0], summary.status.value) for summary in page.actors]
        cursor = page.cursor
        if cursor is None:
            break
    assert len(seen) == len(set(seen))
    return seen


async def test_actors_are_listed_by_type_and_status_in_pages(store: EventStore) -> None:
    states = {"a": WorkflowState.SLEEPING, "b": WorkflowState.FAILED, "c": WorkflowState.COMPLETED,
              "d": WorkflowState.RUNNING, "e": None, "f": WorkflowState.FAILED, "g": WorkflowState.PAUSED,
              "h": WorkflowState.TERMINATED}
    for key, state in states.items():
        actor = await created(store, key)
        if state is not None:
            assert await store.commit(actor, 1, draft(workflow=record(state), at=T0 + 5)) == 2
    other = ActorRef(name="other", key=("a",))
    assert await store.create(other, meta().model_copy(update={"name": "other", "key": ("a",)}), {},
                              WorkflowRecord(), [])
    everything = await listing(store, "counter")
    # by status, then by id; `running` (a wake-up in progress) keeps the pending listing until the wake-up's end
    assert everything == [("c", "completed"), ("b", "failed"), ("f", "failed"), ("g", "paused"), ("d", "pending"),
                          ("e", "pending"), ("a", "sleeping"), ("h", "terminated")]
    assert await listing(store, "counter", limit=1) == everything
    assert await listing(store, "counter", limit=4) == everything
    assert await listing(store, "counter", WorkflowState.FAILED) == [("b", "failed"), ("f", "failed")]
    assert await listing(store, "counter", WorkflowState.FAILED, limit=1) == [("b", "failed"), ("f", "failed")]
    assert await listing(store, "counter", WorkflowState.DIVERGED) == []
    assert await listing(store, "other") == [("a", "pending")]
    assert await listing(store, "nobody") == []
    summary = await store.read_summary(ref("b"))
    assert summary is not None and (summary.name, summary.key, summary.status) == ("counter", ("b", "x/y"),
                                                                                   WorkflowState.FAILED)
    assert (summary.since, summary.version, summary.created_at, summary.attributes) == (T0 + 5, 2, T0, None)
    assert await store.read_summary(ref("nobody")) is None


async def test_a_commit_that_keeps_the_status_does_not_rewrite_it(store: EventStore) -> None:
    actor = await created(store)
    await store.commit(actor, 1, draft(workflow=record(WorkflowState.SLEEPING), at=T0 + 1))
    for version, state in ((2, WorkflowState.RUNNING), (3, WorkflowState.SLEEPING), (4, None)):
        # mid-wake-up `running`, back to sleeping, an action (no workflow change): none of them moves the listing
        await store.commit(actor, version, draft(workflow=record(state) if state else None,
                                                 state={"value": version}, at=T0 + version))
    summary = await store.read_summary(actor)
    assert summary is not None and (summary.status, summary.version, summary.since) == (WorkflowState.SLEEPING, 2,
                                                                                        T0 + 1)
    await store.commit(actor, 5, draft(workflow=record(WorkflowState.COMPLETED), at=T0 + 9))
    summary = await store.read_summary(actor)
    assert summary is not None and (summary.status, summary.version, summary.since) == (WorkflowState.COMPLETED, 6,
                                                                                        T0 + 9)


async def test_the_listing_moves_at_the_last_commit_of_a_wake_up_not_at_its_first(store: EventStore) -> None:
    """A first wake-up of three commits (running, running, sleeping) moves the listing once: pending -> sleeping at
    its last commit (docs/performance.md, "The listing's status item"). Ended or failed actors that run again (a
    reset, a resume) are listed sleeping while they run, as before: never as ended."""
    actor = await created(store)
    for version, state in ((1, WorkflowState.RUNNING), (2, WorkflowState.RUNNING)):
        await store.commit(actor, version, draft(workflow=record(state), state={"value": version}, at=T0 + version))
        summary = await store.read_summary(actor)
        assert summary is not None and (summary.status, summary.version, summary.since) == (WorkflowState.PENDING, 1,
                                                                                            T0)
        assert await listing(store, "counter", WorkflowState.PENDING) == [("a", "pending")]
    await store.commit(actor, 3, draft(workflow=record(WorkflowState.SLEEPING), at=T0 + 3))
    summary = await store.read_summary(actor)
    assert summary is not None and (summary.status, summary.version, summary.since) == (WorkflowState.SLEEPING, 4,
                                                                                        T0 + 3)
    for version, state, listed in ((4, WorkflowState.RUNNING, "sleeping"), (5, WorkflowState.COMPLETED, "completed"),
                                   (6, WorkflowState.RUNNING, "sleeping"), (7, WorkflowState.FAILED, "failed"),
                                   (8, WorkflowState.RUNNING, "sleeping"), (9, WorkflowState.COMPLETED, "completed")):
        await store.commit(actor, version, draft(workflow=record(state), at=T0 + version))
        assert await listing(store, "counter") == [("a", listed)], (version, state)


@pytest.mark.parametrize("cursor", ["", "garbage", "failed#", "failed#other/a", "running#counter/a",
                                    "sleeping#counter/a"])
async def test_a_cursor_from_elsewhere_is_refused(store: EventStore, cursor: str) -> None:
    await created(store)
    with pytest.raises(InvalidCursorError, match="cursor"):
        await store.list_actors("counter", status=WorkflowState.FAILED, after=cursor)


async def test_counts_per_type_and_status_stop_at_the_limit(store: EventStore) -> None:
    await populated(store)
    counts = {status.value: await store.count_actors("counter", status, limit=100)
              for status in (WorkflowState.FAILED, WorkflowState.SLEEPING, WorkflowState.PENDING,
                             WorkflowState.DIVERGED)}
    assert {s: (c.count, c.exact) for s, c in counts.items()} == {
        "failed": (3, True), "sleeping": (1, True), "pending": (1, True), "diverged": (0, True)}
    assert (await store.count_actors("other", WorkflowState.FAILED, limit=100)).count == 1
    assert (await store.count_actors("nobody", WorkflowState.FAILED, limit=100)).count == 0
    capped = await store.count_actors("counter", WorkflowState.FAILED, limit=2)
    assert (capped.count, capped.exact) == (2, False)
    exact = await store.count_actors("counter", WorkflowState.FAILED, limit=3)
    assert (exact.count, exact.exact) == (3, True)
