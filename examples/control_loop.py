"""Signal-driven control loop: the workflow advances only when a control signal arrives on its
queue (pause, resume, stop) instead of polling on a fixed interval. Each signal is applied in a
step that sets the mode; every signal is handled, "stop" included, so a later "resume" still applies
(as in the reference: stop is a mode, not the end of the workflow)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup

Mode = Literal["running", "paused", "stopped"]
MODE_AFTER: dict[str, Mode] = {"pause": "paused", "resume": "running", "stop": "stopped"}


class ControlState(BaseModel):
    mode: Mode = "running"
    handled_signals: int = 0


class ControlSignal(BaseModel):
    kind: Literal["pause", "resume", "stop"]


control_loop = actor("control-loop", state=ControlState, queues={"signals": queue(ControlSignal)})


@control_loop.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        batch = await loop.queue.next_batch("wait-signal", timeout=30)
        if not batch:
            return
        kind = batch[0].body.kind

        def apply(s: StepContext) -> None:
            s.state.handled_signals += 1
            s.state.mode = MODE_AFTER[kind]

        await loop.step("apply-signal", apply)

    await ctx.loop("control-loop", iteration)


@control_loop.action
def get_state(c: ActionContext) -> ControlState:
    return c.state


registry = setup(control_loop)
