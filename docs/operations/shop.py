"""The shop of docs/operations.md: an order reserves its item, charges the card, then waits to be shipped.

The payment provider is down while a file named `payments.down` exists in the current directory
(`touch payments.down` to break it, `rm payments.down` to fix it).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, event, queue, setup
from dormant.actor import Registry


class Order(BaseModel):
    item: str = ""
    charge: str | None = None
    carrier: str | None = None


class Ship(BaseModel):
    carrier: str


class Shipped(BaseModel):
    carrier: str


def charge_card(order_id: str) -> str:
    if Path("payments.down").exists():
        raise ConnectionError("the payment provider is unavailable")
    return f"ch_{order_id}"


def define(reserve_step: str) -> Registry:
    """The shop's registry; `reserve_step` is the name of its first step (what a careless refactor renames)."""
    order = actor("order", state=Order, queues={"ship": queue(Ship)}, events={"shipped": event(Shipped)})

    @order.workflow
    async def run(ctx: WorkflowContext) -> dict[str, str]:
        def reserve(s: StepContext) -> str:
            s.state.item = str(s.input or "book")
            return str(s.state.item)

        def charge(s: StepContext) -> str:
            s.state.charge = charge_card(s.key[0])
            return str(s.state.charge)

        await ctx.step(reserve_step, reserve)
        receipt = await ctx.step("charge", charge, max_retries=2, retry_backoff_base=0.5)
        shipping = await ctx.queue.next("wait-ship")

        def ship(s: StepContext) -> str:
            s.state.carrier = shipping.body.carrier
            s.broadcast("shipped", Shipped(carrier=shipping.body.carrier))
            return str(s.state.carrier)

        await ctx.step("ship", ship)
        return {"charge": receipt, "carrier": shipping.body.carrier}

    @order.action
    def get(c: ActionContext) -> Order:
        return c.state  # type: ignore[no-any-return]

    return setup(order)


registry = define("reserve")
