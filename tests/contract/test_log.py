"""The log: create, exists, load, commit and its version conflicts, and what a load gives after many commits
(snapshots, compaction), on every backend. The DynamoDB ring's own mechanics (its items, request counts, torn reads,
crashes between a commit and its derived items) are in tests/integration/test_aws_store.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dormant.errors import VersionConflict
from dormant.ports import ActorSnapshot, EventStore
from dormant.workflow.history import WorkflowRecord, WorkflowState
from tests.contract.conftest import Backend
from tests.contract.support import T0, created, draft, entry, meta, ref


async def test_create_exists_load_round_trip(store: EventStore) -> None:
    actor = ref()
    assert not await store.exists(actor)
    assert await store.load(actor) is None
    assert await store.create(actor, meta(actor_input={"n": [1, 2]}), {"value": 3},
                              WorkflowRecord(state=WorkflowState.PENDING), [("created", {"by": "test"})])
    assert await store.exists(actor)
    assert not await store.create(actor, meta(), {"value": 99}, WorkflowRecord(), [])  # exists: no change
    snapshot = await store.load(actor)
    assert snapshot is not None
    assert (snapshot.version, snapshot.state, snapshot.history, snapshot.inbox) == (1, {"value": 3}, [], [])
    assert snapshot.meta == meta(actor_input={"n": [1, 2]})
    assert snapshot.workflow == WorkflowRecord()
    assert snapshot.wake_error is None and snapshot.search == {}
    events = await store.read_events(actor, 0, 10)
    assert [(e.seq, e.name, e.payload, e.at) for e in events] == [(1, "created", {"by": "test"}, T0)]
    assert not await store.exists(ref("other"))


async def test_commit_round_trip_and_prefix_deletion(store: EventStore) -> None:
    actor = await created(store)
    loop = entry("loop", 1, kind="loop")
    v2 = await store.commit(actor, 1, draft(
        upserts=[loop, entry("loop/~1/apply", 2, 1), entry("loop/~10/apply", 3, 10), entry("other", 4, "x")],
        state={"value": 1}, workflow=WorkflowRecord(state=WorkflowState.SLEEPING, waiting_for=["counter"])))
    assert v2 == 2
    v3 = await store.commit(actor, 2, draft(deleted=["loop/~1"], upserts=[entry("loop/~11/apply", 5, 11)]))
    assert v3 == 3
    snapshot = await store.load(actor)
    assert snapshot is not None
    assert snapshot.version == 3
    assert snapshot.state == {"value": 1}  # unchanged by a commit with state=None
    assert snapshot.workflow.state is WorkflowState.SLEEPING and snapshot.workflow.waiting_for == ["counter"]
    by_location = {e.location: e for e in snapshot.history}
    # "loop/~1" goes with everything under it, but not its sibling "loop/~10"
    assert sorted(by_location) == ["loop", "loop/~10/apply", "loop/~11/apply", "other"]
    assert by_location["loop/~10/apply"].output == 10 and by_location["other"].output == "x"


async def test_commit_conflicts(store: EventStore) -> None:
    with pytest.raises(VersionConflict):
        await store.commit(ref("ghost"), 1, draft(state={"value": 1}))
    actor = await created(store)
    assert await store.commit(actor, 1, draft(state={"value": 1})) == 2
    with pytest.raises(VersionConflict):
        await store.commit(actor, 1, draft(state={"value": 2}))  # same expected version: loses
    with pytest.raises(VersionConflict):
        await store.commit(actor, 5, draft(state={"value": 2}))  # from the future
    snapshot = await store.load(actor)
    assert snapshot is not None and (snapshot.version, snapshot.state) == (2, {"value": 1})


async def test_twenty_concurrent_commits_exactly_one_wins(store: EventStore) -> None:
    actor = await created(store)
    await store.load(actor)

    async def attempt(n: int) -> int | None:
        try:
            return await store.commit(actor, 1, draft(state={"value": n}, consumed=[], events=[("won", n)]))
        except VersionConflict:
            return None

    results = await asyncio.gather(*(attempt(n) for n in range(20)))
    winners = [n for n, version in enumerate(results) if version is not None]
    assert len(winners) == 1 and results[winners[0]] == 2
    snapshot = await store.load(actor)
    assert snapshot is not None and (snapshot.version, snapshot.state) == (2, {"value": winners[0]})
    assert [(e.seq, e.payload) for e in await store.read_events(actor, 0, 10)] == [(1, winners[0])]


def _comparable(snapshot: ActorSnapshot | None) -> dict[str, Any]:
    assert snapshot is not None
    return {"version": snapshot.version, "state": snapshot.state, "workflow": snapshot.workflow,
            "history": sorted((e.location, e.kind.value, e.output) for e in snapshot.history)}


async def test_every_version_loads_as_committed_through_snapshots_and_compaction(backend: Backend) -> None:
    """40 iterations of a queue loop (each commit writes an iteration and compacts the one two back; the workflow
    record changes every third): after each commit a load, and a load by a store that has read nothing, give exactly
    the version the commits make, whichever commits carry snapshots."""
    store = backend.store
    actor = await created(store, state={"value": -1})
    history: dict[str, tuple[str, Any]] = {}
    workflow = WorkflowRecord()
    for n in range(40):
        upserts = [{**entry("loop", 1, kind="loop"), "status": "pending", "iteration": n + 1},
                   entry(f"loop/~{n}/wait", 2 * n + 2, {"id": f"m{n}"}, kind="message"),
                   entry(f"loop/~{n}/apply", 2 * n + 3, n)]
        deleted = [f"loop/~{n - 2}"] if n >= 2 else []
        if n % 3 == 0:
            workflow = WorkflowRecord(state=WorkflowState.SLEEPING if n % 2 else WorkflowState.RUNNING,
                                      waiting_for=["counter"], deadline=T0 + n)
        assert await store.commit(actor, n + 1, draft(upserts=upserts, deleted=deleted, state={"value": n},
                                                      workflow=workflow if n % 3 == 0 else None)) == n + 2
        for prefix in deleted:
            history = {location: value for location, value in history.items() if not location.startswith(prefix + "/")}
        history.update({e["location"]: (e["kind"], e["output"]) for e in upserts})
        expected = {"version": n + 2, "state": {"value": n}, "workflow": workflow,
                    "history": sorted((location, kind, output) for location, (kind, output) in history.items())}
        assert _comparable(await store.load(actor)) == expected, n
        if n % 7 == 0 or n == 39:
            assert _comparable(await backend.another_process().load(actor)) == expected, n
    loaded = await store.load(actor)
    assert loaded is not None and sorted(e.location for e in loaded.history) == [
        "loop", "loop/~38/apply", "loop/~38/wait", "loop/~39/apply", "loop/~39/wait"]
