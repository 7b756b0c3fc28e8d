"""Loops: the DESIGN.md counter processes queued deltas in order, durably, with bounded history."""

from __future__ import annotations

from dormant.testing import TestEnv
from examples.counter import registry


async def test_deltas_are_applied_in_order() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("workflow-counter", ["main"])
        await handle.send("counter", {"delta": 1})
        await handle.send("counter", {"delta": 2})
        await env.run_until_idle()

        state = await handle.get_state()
        assert (state.value, state.processed) == (3, 2)
        status = await handle.status()
        assert status.workflow == "sleeping"
        assert status.waiting_for.queues == ["counter"]


async def test_history_stays_bounded_and_a_redeploy_continues_the_loop() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("workflow-counter", ["main"])
        for delta in range(1, 51):
            await handle.send("counter", {"delta": delta})
        await env.run_until_idle()
        assert (await handle.get_state()).value == sum(range(1, 51))

        history = await handle.history()
        loop_entry = next(e for e in history if e.location == "counter-loop")
        assert loop_entry.iteration == 50  # the 51st iteration waits for the next command
        iterations = {e.location.split("/")[1] for e in history if e.location.startswith("counter-loop/")}
        assert len(iterations) <= 3  # compacted: a small recent window plus the current iteration

    async with TestEnv(registry, store=env.store) as again:
        handle = again.client.get_or_create("workflow-counter", ["main"])
        await handle.send("counter", {"delta": -275})
        await again.run_until_idle()
        state = await handle.get_state()
        assert (state.value, state.processed) == (sum(range(1, 51)) - 275, 51)
        assert again.reports[-1].replayed <= 5  # replays only the current iteration, not 51 of them
