"""Coordinator -> worker RPC: each task becomes exactly one action call on the chosen worker."""

from __future__ import annotations

from dormant.testing import TestEnv
from examples.coordinator_rpc import registry


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


async def test_a_redeploy_replays_recorded_results_without_calling_workers_again() -> None:
    async with TestEnv(registry) as env:
        coordinator = env.client.get_or_create("coordinator", ["main"])
        await coordinator.send("tasks", {"task_id": "t1", "worker_id": "w1", "value": 1})
        await env.run_until_idle()
        store = env.store

    async with TestEnv(registry, store=store) as env:  # every actor wakes once and replays
        await env.run_until_idle()
        coordinator = env.client.get_or_create("coordinator", ["main"])
        await coordinator.send("tasks", {"task_id": "t2", "worker_id": "w1", "value": 4})
        await env.run_until_idle()
        assert (await coordinator.state()).last_result == 8
        assert (await env.client.get_or_create("worker", ["w1"]).get_state()).tasks_run == 2
