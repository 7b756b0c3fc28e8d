"""The stored format: a table written by an earlier release (tests/integration/data/, made by
tests/integration/stored_protocol.py) is read, sent to, committed to and deleted by the code under test on DynamoDB
Local, and it reads back what that release read. A change of the format that forgets the data already written fails
here: such a change comes with a migration (docs/storage.md), and this data stays its input."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dormant.core.slots import SlotLease
from dormant.dynamodb.store import DynamoEventStore
from dormant.ports import ActorRef
from dormant.settings import Settings
from dormant.workflow.history import WorkflowRecord, WorkflowState
from examples.counter import registry as counter_registry
from tests.aws_env import AwsTestEnv
from tests.contract.support import T0, draft
from tests.integration.conftest import shared_session
from tests.integration.stored_protocol import (
    STORE_NOW,
    TOKEN_HASH,
    ask,
    expectations,
    message,
    restore,
    settings,
)

DATA = Path(__file__).parent / "data"
RELEASES = sorted(DATA.glob("protocol_*.json"))


@pytest.fixture(params=RELEASES, ids=[path.stem for path in RELEASES])
async def written(request: pytest.FixtureRequest, aws_endpoints: dict[str, str]) -> AsyncIterator[
        tuple[DynamoEventStore, dict[str, Any]]]:
    """A fresh table and bucket holding what an earlier release wrote, and a store of the code under test on them."""
    data = json.loads(request.param.read_text())
    config = settings(**aws_endpoints)
    async with DynamoEventStore.connect(config, session=shared_session(), clock=lambda: STORE_NOW) as store:
        await store.create_table()
        assert store.values.blobs is not None
        await store.values.blobs.client.create_bucket(Bucket=config.bucket)
        await restore(store, data)
        yield store, data


def refs_of(data: dict[str, Any]) -> dict[str, ActorRef]:
    return {name: ActorRef(name=parts[0], key=tuple(parts[1:])) for name, parts in data["refs"].items()}


async def test_what_an_earlier_release_wrote_reads_back_the_same(
        written: tuple[DynamoEventStore, dict[str, Any]]) -> None:
    store, data = written
    refs = refs_of(data)
    expected = data["expected"]
    assert set(expected["snapshots"]) == set(refs) and len(refs) >= 13  # every status, and the special cases
    assert await expectations(store, refs) == expected


async def test_an_earlier_releases_actors_are_sent_to_woken_and_deleted(
        written: tuple[DynamoEventStore, dict[str, Any]]) -> None:
    store, data = written
    refs = refs_of(data)
    expected = data["expected"]["snapshots"]
    for name, ref in refs.items():
        before = expected[name]
        pending = [item["id"] for item in before["inbox"]]
        # a duplicate of a message consumed by the earlier release is refused, a new one taken
        consumed = "kept-0" if name == "kept" else f"{name}-m1"  # kept-0: tombstoned by a snapshot; the rest in
        if name not in ("pending", "big", "callback", "order", "runtime"):  # the commit that consumed them
            assert not await store.enqueue(ref, message(consumed)), f"{name}: a consumed id came back"
        assert await store.enqueue(ref, message(f"{name}-new"))
        loaded = await store.load(ref)
        assert loaded is not None and loaded.version == before["version"]
        assert [item.id for item in loaded.inbox] == [*pending, f"{name}-new"], name
        # a wake-up: consumes everything pending, rests sleeping (or finished: it stays so)
        state = WorkflowState(before["workflow"]["state"])
        resting = state if state in (WorkflowState.COMPLETED, WorkflowState.TERMINATED) else WorkflowState.SLEEPING
        listed = await store.read_summary(ref)  # as the release listed it (checked by the test above)
        assert listed is not None
        version = await store.commit(ref, loaded.version, draft(
            state={**loaded.state, "woken": True}, consumed=[*pending, f"{name}-new"],
            responses={f"{name}-new": {"ok": name}}, workflow=WorkflowRecord(state=resting), at=T0 + 50))
        cold = DynamoEventStore(store.client, store.settings, clock=lambda: STORE_NOW, blobs=store.values.blobs)
        after = await cold.load(ref)  # a process that has read nothing
        assert after is not None and (after.version, after.inbox, after.state["woken"]) == (version, [], True)
        assert after.state == {**before["state"], "woken": True}, name
        summary = await store.read_summary(ref)
        moved = listed.status is not resting  # the status item is written only when the listing moves
        assert summary is not None and summary.status is resting and (summary.version == version) is moved, name
        assert (await store.wait_response(ref, f"{name}-new", 0.0)) == (True, {"ok": name})
    kept = await store.retained_versions(refs["kept"])
    assert kept is not None and kept[-1].version == expected["kept"]["version"] + 1
    # the slot items: the holder holds its slot still, a newcomer waits behind the waiter of the earlier release
    assert isinstance(await store.acquire_slot(ask("h1")), SlotLease)
    assert not isinstance(await store.acquire_slot(ask("h4")), SlotLease)
    assert (await store.read_callback(TOKEN_HASH)) is not None
    for ref in refs.values():
        assert await store.delete(ref, at=T0 + 60)
        assert await store.load(ref) is None
        left = await store.requests.query("pk = :pk", {":pk": {"S": ref.id}}, projection="sk")
        assert [item["sk"]["S"] for item in left] == ["x#"], ref  # the deletion mark alone
    assert (await store.list_actors("counter")).actors == []
    assert await store.deleted_at(ActorRef(name="counter", key=("gone",))) == T0 + 5


@pytest.mark.parametrize("path", RELEASES, ids=[path.stem for path in RELEASES])
async def test_an_earlier_releases_workflow_is_woken_by_the_runtime(path: Path, aws_endpoints: dict[str, str]) -> None:
    """examples/counter.py's actor as the earlier release's worker left it: the worker under test replays it, runs
    the next message's step and commits over the old items; the client deletes it."""
    data = json.loads(path.read_text())
    async with AwsTestEnv(counter_registry, settings=Settings(**aws_endpoints)) as env:
        async with DynamoEventStore.connect(env.settings, session=shared_session()) as store:
            await restore(store, data)
        before = data["expected"]["snapshots"]["runtime"]
        handle = env.client.get("workflow-counter", ["old"])
        await handle.send("counter", {"delta": 7})
        await env.run_until_idle()
        state = await handle.get_state()
        assert (state.value, state.processed) == (before["state"]["value"] + 7, before["state"]["processed"] + 1)
        assert (await handle.status()).version > before["version"]
        await handle.delete()
        assert await env.store.load(ActorRef(name="workflow-counter", key=("old",))) is None
