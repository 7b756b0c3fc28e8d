"""Bounded drain + concurrency cap: each loop iteration takes a window of at most 10 work
messages: it waits up to 30 s for the first, then tops the window up one message at a time for as
long as each next one arrives within 10 ms, and processes the window in one step, at most 3 items
at a time. Per-iteration work and pressure on the downstream service stay bounded however large the
backlog, and a trickle of messages close together still shares one window. Each receive has its own
name (wait-work, top-up-1 ... top-up-9): names are unique per scope (the reference reuses one name in
its for-loop, which RivetKit itself refuses as a duplicate entry)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup

MAX_PER_ITERATION = 10
CONCURRENCY_LIMIT = 3
IDLE_TIMEOUT = 30.0  # seconds to wait for the first message of a window
TOP_UP_TIMEOUT = 0.01  # then this long for more


async def _process_work(value: int) -> int:
    return value * 2


@dataclass
class Services:
    """The downstream service doing the work (injected; tests replace it)."""

    process_work: Callable[[int], Awaitable[int]] = _process_work


services = Services()


class DrainState(BaseModel):
    processed: int = 0
    last_window_size: int = 0
    last_window_total: int = 0
    window_sizes: list[int] = []


class Work(BaseModel):
    id: str
    value: int


bounded_drain = actor("bounded-drain", state=DrainState, queues={"work": queue(Work)})


@bounded_drain.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        window: list[Work] = []
        for i in range(MAX_PER_ITERATION):
            batch = await loop.queue.next_batch("wait-work" if i == 0 else f"top-up-{i}",
                                                timeout=IDLE_TIMEOUT if i == 0 else TOP_UP_TIMEOUT)
            if not batch:
                break
            window.append(batch[0].body)
        if not window:
            return

        async def process_window(s: StepContext) -> None:
            limit = asyncio.Semaphore(CONCURRENCY_LIMIT)

            async def process(work: Work) -> int:
                async with limit:
                    return await services.process_work(work.value)

            results = await asyncio.gather(*(process(work) for work in window))
            s.state.processed += len(window)
            s.state.last_window_size = len(window)
            s.state.last_window_total = sum(results)
            s.state.window_sizes.append(len(window))

        await loop.step("process-window", process_window)

    await ctx.loop("bounded-drain-loop", iteration)


@bounded_drain.action
def get_state(c: ActionContext) -> DrainState:
    return c.state


registry = setup(bounded_drain)
