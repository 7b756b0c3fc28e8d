"""Progress in state + broadcast: ordered progress events, matching state, no duplicates on replay."""

from __future__ import annotations

from typing import Any

from dormant import ActorHandle
from dormant.testing import TestEnv
from examples.progress_broadcast import registry


async def events_of(handle: ActorHandle) -> list[tuple[str, Any]]:
    return [(record.name, record.payload) async for record in handle.events(follow=False)]


def progress(stage: str, completed: int, total: int) -> tuple[str, Any]:
    return ("progress_updated", {"stage": stage, "completed": completed, "total": total})


async def test_progress_is_stored_and_broadcast_in_order() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("progress", ["main"])
        await handle.send("jobs", {"value": 5})
        await handle.send("jobs", {"value": 7})
        await env.run_until_idle()

        assert await events_of(handle) == [progress("running", 0, 1), progress("completed", 1, 1),
                                           progress("running", 1, 2), progress("completed", 2, 2)]
        state = await handle.get_state()
        assert state.sum == 12
        assert state.progress.model_dump() == {"stage": "completed", "completed": 2, "total": 2}


async def test_replay_does_not_broadcast_again() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("progress", ["main"])
        await handle.send("jobs", {"value": 1})
        await env.run_until_idle()
        seen = [record.seq async for record in handle.events(follow=False)]

    async with TestEnv(registry, store=env.store) as again:
        handle = again.client.get_or_create("progress", ["main"])
        await handle.send("jobs", {"value": 2})
        await again.run_until_idle()
        assert await events_of(handle) == [progress("running", 0, 1), progress("completed", 1, 1),
                                           progress("running", 1, 2), progress("completed", 2, 2)]
        # A client resumes from the last event it saw.
        newer = [(r.name, r.payload) async for r in handle.events(after=seen[-1], follow=False)]
        assert newer == [progress("running", 1, 2), progress("completed", 2, 2)]
