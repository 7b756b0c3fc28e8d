"""Cron: a self-rescheduling action enqueues one tick per minute; the workflow runs once per tick."""

from __future__ import annotations

from dormant.testing import TestEnv
from examples.cron import next_minute, registry


def test_next_minute() -> None:
    assert next_minute(120.0) == 180.0
    assert next_minute(125.5) == 180.0


async def test_runs_once_per_minute() -> None:
    async with TestEnv(registry, start=1_767_225_630.0) as env:  # 30 s past a minute
        handle = env.client.get_or_create("cron", ["main"])
        await handle.status()  # creating the actor runs on_create, which schedules the first tick
        first = next_minute(env.now())
        await env.advance(29)
        assert (await handle.get_state()).runs == 0

        await env.advance(1)
        state = await handle.get_state()
        assert (state.runs, state.last_run_at) == (1, first)

        await env.advance(5 * 60)
        state = await handle.get_state()
        assert (state.runs, state.last_run_at) == (6, first + 5 * 60)
        # Exactly one pending scheduled action (the next tick); ticks did not pile up.
        assert len(env.store.inbox_ids(handle.ref)) == 1


async def test_ticks_continue_after_a_redeploy() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("cron", ["main"])
        await handle.status()
        await env.advance(3 * 60)
        assert (await handle.get_state()).runs == 3

    async with TestEnv(registry, store=env.store) as again:
        handle = again.client.get_or_create("cron", ["main"])
        await again.advance(2 * 60)
        assert (await handle.get_state()).runs == 5
