"""The actors the cost benchmarks run (`DORMANT_APP=benchmarks.workloads:registry`): the examples' patterns, and
two runs of four steps (all durable; three ephemeral and one durable: docs/semantics.md, "Ephemeral steps")."""

from __future__ import annotations

from pydantic import BaseModel

from dormant import StepContext, WorkflowContext, actor, setup
from examples import counter, fan_out_fan_in, request_response, simple_workflow, timers


class Steps(BaseModel):
    done: int = 0
    status: str = "idle"


def _one(s: StepContext) -> int:
    s.state.done += 1
    return int(s.state.done)


def _last(s: StepContext) -> None:
    s.state.done += 1
    s.state.status = "complete"


four_steps = actor("four-steps", state=Steps)
ephemeral_steps = actor("ephemeral-steps", state=Steps)


@four_steps.workflow
async def run_four(ctx: WorkflowContext) -> None:
    for n in range(3):
        await ctx.step(f"step-{n}", _one)
    await ctx.step("step-3", _last)


@ephemeral_steps.workflow
async def run_ephemeral(ctx: WorkflowContext) -> None:
    for n in range(3):
        await ctx.step(f"step-{n}", _one, ephemeral=True)
    await ctx.step("step-3", _last)


registry = setup(*[definition for module in (counter, fan_out_fan_in, request_response, simple_workflow, timers)
                   for definition in module.registry.actors.values()], four_steps, ephemeral_steps)
