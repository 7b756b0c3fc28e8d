"""Deletion: everything of the actor goes (state, inbox, responses, events, its listing, wake error, attributes),
a delete is safe to run again, a later create starts a new life in which old message ids are new, and the time of the
last deletion (`deleted_at`) outlives the actor, on every backend. Interrupted deletions and stale writers on DynamoDB
are in tests/integration/test_listing_and_deletion.py."""

from __future__ import annotations

from dormant.ports import ActorMeta, EventStore, WakeError
from dormant.workflow.history import WorkflowRecord, WorkflowState
from tests.contract.support import (
    SEARCHED,
    T0,
    attributes,
    created,
    draft,
    found,
    make_order,
    message,
    meta,
    record,
    ref,
    search_draft,
)


async def test_delete_removes_everything_and_a_later_create_starts_fresh(store: EventStore) -> None:
    actor = await created(store, state={"value": 7})
    await store.enqueue(actor, message("m1"))
    await store.enqueue(actor, message("m2"))
    await store.commit(actor, 1, draft(consumed=["m1"], responses={"m1": "ok"}, events=[("e", 1)],
                                       state={"value": 8}, workflow=record(WorkflowState.SLEEPING)))
    await store.record_wake_error(actor, WakeError(message="boom", at=T0))
    assert await store.delete(actor)
    assert await store.load(actor) is None
    assert not await store.exists(actor)
    assert await store.read_summary(actor) is None
    assert (await store.list_actors("counter")).actors == []
    assert (await store.count_actors("counter", WorkflowState.SLEEPING, limit=10)).count == 0
    assert await store.read_events(actor, 0, 10) == []
    assert await store.wait_response(actor, "m1", 0.0) == (False, None)
    assert await store.retained_versions(actor) is None
    assert not await store.delete(actor)  # safe to run again: nothing left, nothing to do
    # A new life: version 1, the initial state, an empty inbox, and message ids seen before are new again.
    assert await store.create(actor, meta(), {"value": 0}, WorkflowRecord(), [])
    snapshot = await store.load(actor)
    assert snapshot is not None and (snapshot.version, snapshot.state, snapshot.inbox) == (1, {"value": 0}, [])
    assert snapshot.wake_error is None and snapshot.history == []
    assert await store.read_events(actor, 0, 10) == []
    assert await store.enqueue(actor, message("m1"))
    assert [(s.key[0], s.status.value) for s in (await store.list_actors("counter")).actors] == [("a", "pending")]


async def test_delete_of_an_actor_never_created_removes_its_early_messages(store: EventStore) -> None:
    actor = ref("early")
    assert await store.enqueue(actor, message("m1"))
    assert not await store.delete(actor)
    assert await store.create(actor, meta("early"), {"value": 0}, WorkflowRecord(), [])
    snapshot = await store.load(actor)
    assert snapshot is not None and snapshot.inbox == []


async def test_the_time_of_the_last_deletion_outlives_the_actor_and_only_moves_forward(store: EventStore) -> None:
    actor = await created(store)
    assert await store.deleted_at(actor) is None
    assert await store.delete(actor, at=T0 + 50)
    assert await store.deleted_at(actor) == T0 + 50
    assert await store.create(actor, meta(), {"value": 0}, WorkflowRecord(), [])  # a new life keeps the mark
    assert await store.deleted_at(actor) == T0 + 50
    assert await store.load(actor) is not None
    assert await store.delete(actor, at=T0 + 20)  # a slow deleter's older time never moves it back
    assert await store.deleted_at(actor) == T0 + 50
    assert not await store.delete(actor, at=T0 + 90)  # nothing left to delete: the time moves on all the same
    assert await store.deleted_at(actor) == T0 + 90
    assert await store.delete(ref("other")) is False and await store.deleted_at(ref("other")) is None  # no `at`
    never = ref("never-created")
    assert not await store.delete(never, at=T0 + 5)
    assert await store.deleted_at(never) == T0 + 5


async def test_a_deletion_time_and_search_attributes_live_side_by_side(store: EventStore) -> None:
    """The deletion's time and the actor's search attributes are kept beside each other: neither is taken for the
    other, in the old life or the new one."""
    actor = await make_order(store, "a", customer="42", amount=7)
    version = await store.commit(actor, 1, search_draft(search=attributes(vip=True)))
    assert await store.delete(actor, at=T0 + 10)
    assert await store.deleted_at(actor) == T0 + 10
    assert await found(store, "customer=42") == [] and await found(store, "vip=true") == []
    assert await store.create(actor, ActorMeta(name=SEARCHED, key=actor.key, created_at=T0 + 11), {}, WorkflowRecord(),
                              [], search=attributes(customer="42"))
    assert await found(store, "customer=42") == ["a"] and await found(store, "amount>=0") == []
    assert await store.commit(actor, 1, search_draft(search=attributes(amount=3))) == version
    assert await found(store, "amount>=0") == ["a"]
    assert await store.deleted_at(actor) == T0 + 10
    snapshot = await store.load(actor)
    assert snapshot is not None and snapshot.search == {"customer": ["s", "42"], "amount": ["i", 3]}
