"""Orders an operator can find: the `shop-order` actor declares search attributes (customer, amount, stage,
placed_at, express) and its steps set them as the order goes, so that an operator finds orders by what happened to
them without reading any actor: `dormant actors list --where customer=42 --where 'amount>10000'`, `GET
/actors/shop-order?where=stage%3Dshipped`, `client.list_actors("shop-order", where=["placed_at>=2026-01-01"])`, and
counts of the matches per status (`dormant actors count --where stage=accepted`).

The attributes are recorded with the step's commit: a step that fails leaves them as they were, and a replayed step
does not set them again. An action can set them too (`hold` marks an order an operator is looking at)."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, Field

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup

EXPRESS_FROM = 10_000  # cents: orders of 100.00 and more ship express


class Placed(BaseModel):
    customer: str = Field(min_length=1, max_length=64)
    amount: int = Field(ge=0, description="In cents")


class Shipped(BaseModel):
    carrier: str


class OrderState(BaseModel):
    customer: str = ""
    amount: int = 0
    carrier: str | None = None


shop_order = actor("shop-order", state=OrderState, queues={"place": queue(Placed), "ship": queue(Shipped)},
                   search={"customer": str, "amount": int, "stage": str, "placed_at": datetime, "express": bool})


@shop_order.workflow
async def run(ctx: WorkflowContext) -> str:
    placed = (await ctx.queue.next("wait-order", names=["place"])).body

    def accept(s: StepContext) -> None:
        s.state.customer, s.state.amount = placed.customer, placed.amount
        s.search.set(customer=placed.customer, amount=placed.amount, stage="accepted",
                     placed_at=datetime.fromtimestamp(s.now(), UTC), express=placed.amount >= EXPRESS_FROM)

    await ctx.step("accept", accept)
    shipped = (await ctx.queue.next("wait-shipping", names=["ship"])).body

    def ship(s: StepContext) -> None:
        s.state.carrier = shipped.carrier
        s.search["stage"] = "shipped"

    await ctx.step("ship", ship)
    return shipped.carrier


@shop_order.action
def hold(c: ActionContext) -> dict[str, object]:
    """An operator looks at this order: it is found with `--where stage=held` until it ships."""
    c.search["stage"] = "held"
    return dict(c.search)


registry = setup(shop_order)
