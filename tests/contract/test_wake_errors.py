"""Wake errors: record_wake_error keeps the last failed wake-up of an existing actor (replacing the one before),
and every load's snapshot shows it beside the inbox; the runtime judges it stale by its version, so a commit leaves it
as it was, on every backend."""

from __future__ import annotations

from dormant.ports import EventStore, WakeError
from tests.contract.support import T0, created, draft, message, ref


async def test_wake_error_is_recorded_on_existing_actors_only(store: EventStore) -> None:
    await store.record_wake_error(ref("ghost"), WakeError(message="boom", at=T0))
    assert not await store.exists(ref("ghost"))
    assert await store.load(ref("ghost")) is None
    actor = await created(store)
    await store.record_wake_error(actor, WakeError(message="first", at=T0, receive_count=1, version=1))
    await store.record_wake_error(actor, WakeError(message="poison", at=T0 + 1, receive_count=5, version=1,
                                                   failures=2))
    await store.enqueue(actor, message("after-error"))
    snapshot = await store.load(actor)
    assert snapshot is not None
    assert snapshot.wake_error == WakeError(message="poison", at=T0 + 1, receive_count=5, version=1, failures=2)
    assert [m.id for m in snapshot.inbox] == ["after-error"]


async def test_a_commit_leaves_the_wake_error_for_the_runtime_to_judge_by_its_version(store: EventStore) -> None:
    actor = await created(store)
    error = WakeError(message="KeyError: 'x'", at=T0, receive_count=2, version=1)
    await store.record_wake_error(actor, error)
    assert await store.commit(actor, 1, draft(state={"value": 1})) == 2
    snapshot = await store.load(actor)
    assert snapshot is not None and snapshot.version == 2 and snapshot.wake_error == error  # stale: version 1 < 2
    assert snapshot.inbox == [] and snapshot.state == {"value": 1}
