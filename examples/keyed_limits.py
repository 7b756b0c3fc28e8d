"""Keyed and prioritized flow control: the payment provider allows one charge in flight per customer (a second one
for the same card is declined as a duplicate), while different customers are charged in parallel. The limit is
declared once, keyed: `Limit(concurrency=1, keyed=True)`, and the charging step names its key, the customer
(`limit="per-customer", limit_key=customer`). An urgent payment (a refund, a retry the customer waits for) asks with
`priority=1` and goes ahead of the customer's batch charges (`priority=5`) waiting in line; waiting ages a step up,
so a batch charge is never passed by one that began waiting more than 4 x 30 s after it (docs/semantics.md, "Keyed
and prioritized limits"). A payment over its customer's limit suspends its actor until that customer's slot frees:
status says `waits for limit per-customer key="c-42" priority=5`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel

from dormant import ActionContext, Limit, StepContext, WorkflowContext, actor, queue, setup

URGENT, BATCH = 1, 5  # priorities: 1 is served first


async def _charge(customer: str, payment: str, cents: int) -> str:
    return f"ch_{customer}_{payment}_{cents}"


@dataclass
class Provider:
    """The payment provider's API (injected; tests replace it)."""

    charge: Callable[[str, str, int], Awaitable[str]] = _charge


provider = Provider()


class Pay(BaseModel):
    cents: int
    urgent: bool = False


class PaymentState(BaseModel):
    charge_id: str | None = None


payment = actor("payment", state=PaymentState, queues={"pay": queue(Pay)})
"""Key: [customer, payment id]."""


@payment.workflow
async def run(ctx: WorkflowContext) -> str:
    order = await ctx.queue.next("wait-pay")
    customer = await ctx.step("customer", lambda s: s.key[0])

    async def charge(s: StepContext) -> str:
        return await provider.charge(s.key[0], s.key[1], order.body.cents)

    charge_id: str = await ctx.step("charge", charge, limit="per-customer", limit_key=customer,
                                     priority=URGENT if order.body.urgent else BATCH)

    def record(s: StepContext) -> None:
        s.state.charge_id = charge_id

    await ctx.step("record", record)
    return charge_id


@payment.action
def get_state(c: ActionContext) -> PaymentState:
    return c.state


registry = setup(payment, limits={"per-customer": Limit(concurrency=1, keyed=True)})
