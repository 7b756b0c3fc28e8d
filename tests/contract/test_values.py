"""Values of any size (issue 19) and their check (check_values, `dormant doctor`): a state, a step result, a message
body, an actor's input, a response and an event payload far larger than an item are kept whole (memory keeps them as
they are; the DynamoDB store in S3, the items holding references: prepare_message and prepare_input write a message's
or an input's first), read back whole by a store that has read nothing, and reported intact, on every backend. The S3
side's own mechanics (object keys, lifecycles, sweeps, lost objects and their repair) are in
tests/integration/test_large_values.py, test_offload_lifecycle.py and test_doctor.py."""

from __future__ import annotations

from typing import Any

from dormant.ports import InboxMessage
from dormant.workflow.history import WorkflowRecord
from tests.contract.conftest import Backend
from tests.contract.support import T0, created, draft, entry, message, meta, ref


def text(fill: str, size: int) -> str:
    return fill * size


async def test_values_far_larger_than_an_item_are_kept_whole(backend: Backend) -> None:
    store = backend.store
    actor = ref("big")
    actor_input = {"document": text("i", 120_000)}
    prepared_input = await store.prepare_input(actor, actor_input)
    assert await store.create(actor, meta("big", actor_input=prepared_input), {"chunks": [text("s", 90_000)]},
                              WorkflowRecord(), [("created", {"copy": text("e", 70_000)})])
    big = message("big-message", {"text": text("m", 150_000)})
    store.check_message(actor, big)
    assert await store.enqueue(actor, await store.prepare_message(actor, big))
    state = {"chunks": [text("s", 90_000), text("t", 300_000)]}
    result = {"rows": [text("r", 1000)] * 250}
    version = await store.commit(actor, 1, draft(
        upserts=[entry("fetch", 1, result)], state=state, responses={"big-message": text("a", 200_000)},
        events=[("grown", {"copy": text("g", 100_000)})], consumed=["big-message"]))
    assert version == 2
    for reader in (store, backend.another_process()):
        snapshot = await reader.load(actor)
        assert snapshot is not None and snapshot.version == 2
        assert snapshot.meta.input == actor_input and snapshot.state == state
        assert [(e.location, e.output) for e in snapshot.history] == [("fetch", result)]
        assert await reader.wait_response(actor, "big-message", 0.0) == (True, text("a", 200_000))
        events = await reader.read_events(actor, 0, 10)
        assert [(e.seq, e.payload) for e in events] == [(1, {"copy": text("e", 70_000)}),
                                                        (2, {"copy": text("g", 100_000)})]


async def test_a_prepared_message_is_stored_and_read_back_whole(backend: Backend) -> None:
    store = backend.store
    actor = await created(store)
    small = message("small", {"delta": 1})
    assert await store.prepare_message(actor, small) == small  # nothing to write elsewhere: kept as it is
    assert await store.prepare_input(actor, {"n": 1}) == {"n": 1}
    big_body = InboxMessage(id="big", queue="counter", body={"blob": text("b", 250_000)}, created_at=T0)
    big_args = InboxMessage(id="args", queue="reset", kind="action", args=[text("x", 80_000), {"y": text("y", 80_000)}],
                            created_at=T0, not_before=T0 + 5)
    for sent in (big_body, big_args):
        assert await store.enqueue(actor, await store.prepare_message(actor, sent))
        assert await store.message_fingerprint(actor, sent.id) is not None
    assert not await store.enqueue(actor, await store.prepare_message(actor, big_body))  # still its id: a duplicate
    for reader in (store, backend.another_process()):
        snapshot = await reader.load(actor)
        assert snapshot is not None and snapshot.inbox == [big_body, big_args]
    waited = await store.wait_inbox(actor, set(), 1.0)
    assert waited == [big_body, big_args]


async def test_check_values_reports_every_kept_version_intact(backend: Backend) -> None:
    store = backend.store
    assert await store.check_values(ref("nobody")) is None
    actor = await created(store)
    version = 1
    for n in range(5):  # small and big values, in several versions
        version = await store.commit(actor, version, draft(
            upserts=[entry(f"step-{n}", n + 1, text(str(n), 60_000 if n % 2 else 10))],
            state={"value": n, "pad": text("p", 50_000 * (n % 3))}))
    await store.enqueue(actor, await store.prepare_message(actor, message("pending", {"blob": text("q", 70_000)})))
    kept = await store.retained_versions(actor)
    assert kept is not None and [info.version for info in kept] == [1, 2, 3, 4, 5, 6]
    for repair in (False, True):
        report = await store.check_values(actor, repair=repair)
        assert report is not None
        summary: dict[str, Any] = {"actor": report.actor, "key": report.key, "outcome": report.outcome,
                                   "problems": report.problems, "intact": report.intact_versions,
                                   "dropped": report.dropped_messages, "failed": report.marked_failed}
        assert summary == {"actor": "counter", "key": ["a", "x/y"], "outcome": "intact", "problems": [],
                           "intact": [1, 2, 3, 4, 5, 6], "dropped": [], "failed": False}, report.message
    snapshot = await store.load(actor)
    assert snapshot is not None and snapshot.version == 6 and [m.id for m in snapshot.inbox] == ["pending"]
    assert snapshot.inbox[0].body == {"blob": text("q", 70_000)}
