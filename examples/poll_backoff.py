"""Poll + backoff loop: the workflow polls an external dependency; each failure doubles the
durable retry delay (capped), and a success resets it and waits a fixed healthy interval. The
delay is computed in a step and its recorded result is what the sleep uses, so a replay
sleeps until the same deadlines."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, setup

INITIAL_BACKOFF = 0.1  # seconds
MAX_BACKOFF = 5.0
HEALTHY_INTERVAL = 1.0


async def _poll(attempt: int) -> bool:
    return attempt % 3 == 0


@dataclass
class Services:
    """The dependency being polled (injected; tests replace it)."""

    poll: Callable[[int], Awaitable[bool]] = _poll


services = Services()


class PollState(BaseModel):
    attempts: int = 0
    backoff: float = INITIAL_BACKOFF
    status: Literal["unknown", "healthy", "retrying"] = "unknown"


poll_backoff = actor("poll-backoff", state=PollState)


@poll_backoff.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        async def poll(s: StepContext) -> bool:
            s.state.attempts += 1
            return await services.poll(s.state.attempts)

        if await loop.step("poll-target", poll):
            def reset(s: StepContext) -> None:
                s.state.status = "healthy"
                s.state.backoff = INITIAL_BACKOFF

            await loop.step("reset-backoff", reset)
            await loop.sleep("healthy-interval", HEALTHY_INTERVAL)
            return

        def grow(s: StepContext) -> float:
            s.state.status = "retrying"
            s.state.backoff = delay = min(s.state.backoff * 2, MAX_BACKOFF)
            return delay

        await loop.sleep("retry-delay", await loop.step("grow-backoff", grow))

    await ctx.loop("poll-loop", iteration)


@poll_backoff.action
def get_state(c: ActionContext) -> PollState:
    return c.state


registry = setup(poll_backoff)
