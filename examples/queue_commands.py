"""Queue: fire-and-forget commands. Clients `send` typed messages to the actor's queues and move on;
one workflow loop receives them (one wait over all of the actor's queues: a wait without `names=` reads
every declared queue) in the order they were sent and applies each in a step. Sends are validated: an
undeclared queue or an invalid body is an error to the sender, and nothing is stored; a re-sent message
id is ignored, so retries are safe.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup


class AddItem(BaseModel):
    sku: str
    quantity: int = Field(gt=0)


class RemoveItem(BaseModel):
    sku: str


class CartState(BaseModel):
    items: dict[str, int] = Field(default_factory=dict)
    applied: list[str] = Field(default_factory=list)  # every command, in processing order


cart = actor("command-queue", state=CartState,
             queues={"add": queue(AddItem), "remove": queue(RemoveItem)})


@cart.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-command")

        def apply(s: StepContext) -> None:
            body = message.body
            if isinstance(body, AddItem):
                s.state.items[body.sku] = s.state.items.get(body.sku, 0) + body.quantity
                s.state.applied.append(f"add {body.sku} {body.quantity}")
            else:
                s.state.items.pop(body.sku, None)
                s.state.applied.append(f"remove {body.sku}")

        await loop.step("apply-command", apply)

    await ctx.loop("command-loop", iteration)


@cart.action
def get_state(c: ActionContext) -> CartState:
    return c.state


registry = setup(cart)
