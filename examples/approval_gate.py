"""Human approval gate: the workflow validates an order, then waits durably on the `approval`
queue for a person's decision, and fulfils or cancels the order depending on it. The actor
costs nothing while it waits, however long the decision takes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup


async def _noop(order_id: str) -> None:
    return None


@dataclass
class Services:
    """External order API (injected; tests replace it)."""

    validate_order: Callable[[str], Awaitable[None]] = _noop
    fulfill_order: Callable[[str], Awaitable[None]] = _noop
    cancel_order: Callable[[str], Awaitable[None]] = _noop


services = Services()


class GateState(BaseModel):
    status: str = "pending"


class Decision(BaseModel):
    approved: bool


approval_gate = actor("approval-gate", state=GateState, queues={"approval": queue(Decision)})


@approval_gate.workflow
async def run(ctx: WorkflowContext) -> str:
    async def validate(s: StepContext) -> None:
        await services.validate_order(s.key[0])  # the actor key is the order id
        s.state.status = "awaiting_approval"

    await ctx.step("validate-order", validate)

    decision = await ctx.queue.next("wait-approval")

    if decision.body.approved:
        async def fulfill(s: StepContext) -> None:
            await services.fulfill_order(s.key[0])
            s.state.status = "fulfilled"

        await ctx.step("fulfill-order", fulfill)
        return "fulfilled"

    async def cancel(s: StepContext) -> None:
        await services.cancel_order(s.key[0])
        s.state.status = "cancelled"

    await ctx.step("cancel-order", cancel)
    return "cancelled"


@approval_gate.action
def get_state(c: ActionContext) -> GateState:
    return c.state


registry = setup(approval_gate)
