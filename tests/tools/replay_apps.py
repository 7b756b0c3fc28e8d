"""Two versions of one actor, for the offline replay tests."""

from pydantic import BaseModel

from dormant import WorkflowContext, actor, queue, setup


class Approval(BaseModel):
    approved: bool


def _define(second_step: str) -> object:
    gate = actor("gate", queues={"approval": queue(Approval)})

    @gate.workflow
    async def run(ctx: WorkflowContext) -> str:
        await ctx.step("validate", lambda s: "valid")
        await ctx.step(second_step, lambda s: "reserved")
        decision = await ctx.queue.next("wait-approval")
        return "approved" if decision.body.approved else "rejected"

    return setup(gate)


registry_v1 = _define("reserve")
registry_v2 = _define("reserve-stock")  # renamed a recorded step: diverges
