"""Coordinator -> worker RPC: each task becomes exactly one action call on the chosen worker."""

from __future__ import annotations

from dormant.errors import StorageError
from dormant.ports import ActorRef
from dormant.testing import TestEnv
from dormant.workflow.execution import CommitDraft
from examples.coordinator_rpc import registry
from tests.examples.idle import assert_idle_timeout


async def test_tasks_are_dispatched_to_their_workers() -> None:
    async with TestEnv(registry) as env:
        coordinator = env.client.get_or_create("coordinator", ["main"])
        await coordinator.send("tasks", {"task_id": "t1", "worker_id": "w1", "value": 5})
        await coordinator.send("tasks", {"task_id": "t2", "worker_id": "w2", "value": 7})
        await coordinator.send("tasks", {"task_id": "t3", "worker_id": "w1", "value": 21})
        await env.run_until_idle()

        state = await coordinator.call("get_state")
        assert state.last_task_id == "t3"
        assert state.last_result == 42
        w1 = env.client.get_or_create("worker", ["w1"])
        w2 = env.client.get_or_create("worker", ["w2"])
        assert (await w1.get_state()).tasks_run == 2
        assert (await w2.get_state()).tasks_run == 1
        outputs = [e.output for e in await coordinator.history() if e.location.endswith("/dispatch-rpc")]
        assert outputs[-1] == 42


async def test_a_crash_between_dispatch_and_record_does_not_call_the_worker_again() -> None:
    async with TestEnv(registry) as env:
        store = env.store
        commit = store.commit
        crashed: list[int] = []

        async def crash_once_before_the_record(ref: ActorRef, version: int, draft: CommitDraft) -> int:
            if ref.name == "coordinator" and not crashed and any(
                    item["location"].endswith("/record-result") for item in draft.upserts):
                crashed.append(version)  # the dispatch step's result is already committed; this one is lost
                raise StorageError("the wake-up died before recording the result")
            return await commit(ref, version, draft)

        store.commit = crash_once_before_the_record  # type: ignore[method-assign]
        coordinator = env.client.get_or_create("coordinator", ["main"])
        await coordinator.send("tasks", {"task_id": "t1", "worker_id": "w1", "value": 4})
        await env.run_until_idle()

        assert crashed  # the fault fired, and the wake-up was run again
        assert (await coordinator.state()).model_dump() == {"last_task_id": "t1", "last_result": 8}
        # The redone wake-up replayed the recorded dispatch: the worker ran the task once.
        assert (await env.client.get_or_create("worker", ["w1"]).get_state()).tasks_run == 1
        await assert_idle_timeout(env, coordinator, "orchestrator-loop", 30)
