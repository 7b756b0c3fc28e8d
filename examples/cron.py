"""Cron (queue-driven): scheduling runs actions, so a small scheduled action bridges to the workflow.
`on_create` schedules `enqueue_cron_tick` at the next minute; the action enqueues a `cron-tick` message
and schedules itself for the minute after; the workflow loop processes each tick in a step. The work stays
in the durable workflow, and the action only keeps the clock ticking.
"""

from __future__ import annotations

import math

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup

MINUTE = 60.0


def next_minute(timestamp: float) -> float:
    """The first whole minute strictly after `timestamp` (epoch seconds)."""
    return math.floor(timestamp / MINUTE) * MINUTE + MINUTE


class CronTick(BaseModel):
    scheduled_at: float


class CronState(BaseModel):
    runs: int = 0
    last_run_at: float | None = None


cron = actor("cron", state=CronState, queues={"cron-tick": queue(CronTick)})


@cron.on_create
async def schedule_first_tick(c: ActionContext) -> None:
    first_tick_at = next_minute(c.now())
    await c.schedule.at(first_tick_at, "enqueue_cron_tick", first_tick_at)


@cron.action
async def enqueue_cron_tick(c: ActionContext, scheduled_at: float) -> None:
    await c.queue.send("cron-tick", {"scheduled_at": scheduled_at})
    next_tick_at = next_minute(scheduled_at)
    await c.schedule.at(next_tick_at, "enqueue_cron_tick", next_tick_at)


@cron.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-cron-tick")

        def run_cron_job(s: StepContext) -> None:
            s.state.runs += 1
            s.state.last_run_at = message.body.scheduled_at

        await loop.step("run-cron-job", run_cron_job)

    await ctx.loop("cron-loop", iteration)


@cron.action
def get_state(c: ActionContext) -> CronState:
    return c.state


registry = setup(cron)
