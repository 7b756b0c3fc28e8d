"""Setup & teardown (Loop.break_): the workflow waits for its session's `config` message and a step opens
the worker session; a loop processes `work` messages received together with `control` messages (one wait
on both queues via `names=[...]`), a `stop` control message ends the loop with `Loop.break_(reason)`, and
a last step tears the session down. Each wait names the queues it reads: work sent before the config
waits for the loop, and a second config sent later is not mistaken for work or control. The loop's break
value is recorded, so the teardown sees the stop reason on any replay.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from dormant import ActionContext, Loop, StepContext, WorkflowContext, actor, queue, setup


class WorkMessage(BaseModel):
    amount: int


class ControlMessage(BaseModel):
    type: Literal["stop"]
    reason: str


class SessionConfig(BaseModel):
    pool: str


class WorkerState(BaseModel):
    phase: Literal["idle", "running", "stopped"] = "idle"
    total: int = 0
    processed: int = 0
    stop_reason: str | None = None
    worker_session_id: str | None = None


async def _open_session(pool: str) -> str:
    return f"{pool}-session-1"


async def _process(session_id: str, amount: int) -> int:
    return amount


async def _close_session(session_id: str) -> None:
    return None


@dataclass
class Services:
    """The worker service (HTTP in the original); tests replace it with fakes."""

    open_session: Callable[[str], Awaitable[str]] = _open_session
    process: Callable[[str, int], Awaitable[int]] = _process
    close_session: Callable[[str], Awaitable[None]] = _close_session


services = Services()

worker = actor("setup-run-teardown", state=WorkerState,
               queues={"work": queue(WorkMessage), "control": queue(ControlMessage), "config": queue(SessionConfig)})


@worker.workflow
async def run(ctx: WorkflowContext) -> str:
    config: SessionConfig = (await ctx.queue.next("wait-config", names=["config"])).body

    async def setup_session(s: StepContext) -> None:
        s.state.worker_session_id = await services.open_session(config.pool)
        s.state.phase = "running"
        s.state.stop_reason = None

    await ctx.step("setup", setup_session)

    async def iteration(loop: WorkflowContext) -> object:
        message = await loop.queue.next("wait-command", names=["work", "control"])
        if message.name == "work":
            async def apply_work(s: StepContext) -> None:
                s.state.total += await services.process(s.state.worker_session_id, message.body.amount)
                s.state.processed += 1

            await loop.step("apply-work", apply_work)
            return None
        return Loop.break_(message.body.reason)  # the only control message is "stop"

    stop_reason: str = await ctx.loop("worker-loop", iteration)

    async def teardown(s: StepContext) -> None:
        if s.state.worker_session_id:
            await services.close_session(s.state.worker_session_id)
        s.state.phase = "stopped"
        s.state.stop_reason = stop_reason

    await ctx.step("teardown", teardown)
    return stop_reason


@worker.action
def get_state(c: ActionContext) -> WorkerState:
    return c.state


registry = setup(worker)
