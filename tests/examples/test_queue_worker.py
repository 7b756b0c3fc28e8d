"""Queue-driven worker: jobs are processed one by one; an idle timeout just starts the next wait."""

from __future__ import annotations

from dormant import ActorHandle
from dormant.testing import TestEnv
from examples.queue_worker import registry


async def loop_iteration(handle: ActorHandle) -> int:
    return next(e.iteration for e in await handle.history() if e.location == "worker-loop")


async def test_jobs_are_processed() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("queue-worker", ["main"])
        for i, amount in enumerate([10, 20, 30]):
            await handle.send("jobs", {"id": f"job-{i}", "amount": amount})
        await env.run_until_idle()
        state = await handle.get_state()
        assert (state.processed, state.total_amount) == (3, 60)
        assert await loop_iteration(handle) == 3


async def test_idle_timeouts_continue_the_loop() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("queue-worker", ["main"])
        await handle.status()
        await env.run_until_idle()
        status = await handle.status()
        assert status.waiting_for.queues == ["jobs"]
        assert status.waiting_for.deadline == env.now() + 30

        await env.advance(95)  # three empty batches, at 30, 60 and 90 s
        assert await loop_iteration(handle) == 3
        assert (await handle.status()).waiting_for.deadline == env.now() - 5 + 30

        await handle.send("jobs", {"id": "late", "amount": 7})
        await env.run_until_idle()
        state = await handle.get_state()
        assert (state.processed, state.total_amount) == (1, 7)
        assert await loop_iteration(handle) == 4
