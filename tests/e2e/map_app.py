"""The actor of the bounded map's dev-stack test: each `render` job maps a slow step, a durable 2-second cool-down
(the actor suspends: an SQS timer wakes it) and a second step over its items, `bound` in flight; every item records
when it began and ended (wall clock), so the test can count what overlapped."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import BaseModel

from dormant import StepContext, WorkflowContext, actor, queue, setup


class Render(BaseModel):
    count: int
    bound: int


thumbnails = actor("thumbnails", queues={"render": queue(Render)})


@thumbnails.workflow
async def run(ctx: WorkflowContext) -> Any:
    async def iteration(loop: WorkflowContext) -> None:
        job = (await loop.queue.next("wait-job")).body

        async def render(item: WorkflowContext, index: int) -> list[float]:
            async def slow(s: StepContext) -> float:
                began = time.time()
                await asyncio.sleep(0.2)
                return began

            began = float(await item.step("render", slow))
            await item.sleep("cool-down", 2)
            return [began, float(await item.step("finish", lambda s: time.time()))]

        result = await loop.map("render-all", list(range(job.count)), render, max_concurrency=job.bound)
        await loop.step("done", lambda s: len(result.values))

    await ctx.loop("jobs", iteration)


registry = setup(thumbnails)
