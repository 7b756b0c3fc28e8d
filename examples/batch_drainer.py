"""Batch drainer: metrics arrive one per message and are buffered in state; once 5 are pending
the workflow flushes them as one batch. The "is the buffer full?" check reads state, so it runs
in a step whose recorded result drives the branch (replays take the same path)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup

BATCH_SIZE = 5
IDLE_TIMEOUT = 5.0  # seconds without a message before the buffer is checked again


async def _write_batch(values: list[float]) -> None:
    return None


@dataclass
class Services:
    """Where flushed batches go (injected; tests replace it)."""

    write_batch: Callable[[list[float]], Awaitable[None]] = _write_batch


services = Services()


class DrainerState(BaseModel):
    pending: list[float] = []
    flushed_batches: int = 0
    last_batch_total: float = 0


class Metric(BaseModel):
    value: float


drainer = actor("batch-drainer", state=DrainerState, queues={"metrics": queue(Metric)})


@drainer.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        batch = await loop.queue.next_batch("wait-metric", timeout=IDLE_TIMEOUT)
        if batch:
            value = batch[0].body.value

            def buffer(s: StepContext) -> None:
                s.state.pending.append(value)

            await loop.step("buffer-message", buffer)

        if not await loop.step("check-full", lambda s: len(s.state.pending) >= BATCH_SIZE):
            return

        async def flush(s: StepContext) -> None:
            await services.write_batch(list(s.state.pending))
            s.state.last_batch_total = sum(s.state.pending)
            s.state.flushed_batches += 1
            s.state.pending = []

        await loop.step("flush-batch", flush)

    await ctx.loop("drain-loop", iteration)


@drainer.action
def get_state(c: ActionContext) -> DrainerState:
    return c.state


registry = setup(drainer)
