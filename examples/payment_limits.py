"""Flow control across actors: every invoice actor charges through one payment provider, which allows 2 charges
in flight and 5 new ones a second for the whole account. The limit is declared once, in `setup(...,
limits={"payments": Limit(concurrency=2, per_second=5)})`, and the charging step names it (`limit="payments"`):
however many invoices are due at once, across every actor of the deployment, at most 2 charges run at a time and
at most 5 start in any clock second. A charge over the limit suspends its invoice (no worker time spent waiting)
until a slot frees: status then says "waits for limit payments". Recording the receipt needs no slot."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel

from dormant import ActionContext, Limit, StepContext, WorkflowContext, actor, queue, setup

CONCURRENT_CHARGES = 2
CHARGES_PER_SECOND = 5
CHARGE_TIMEOUT = 30.0  # seconds: a charge that takes longer is cut off, its slot given back, and retried


async def _charge(invoice: str, cents: int, idempotency_key: str) -> str:
    return f"ch_{invoice}_{cents}"


@dataclass
class Provider:
    """The payment provider's API (injected; tests replace it)."""

    charge: Callable[[str, int, str], Awaitable[str]] = _charge


provider = Provider()


class Bill(BaseModel):
    cents: int


class InvoiceState(BaseModel):
    cents: int = 0
    charge_id: str | None = None
    paid: bool = False


invoice = actor("invoice", state=InvoiceState, queues={"bill": queue(Bill)})


@invoice.workflow
async def run(ctx: WorkflowContext) -> str:
    bill = await ctx.queue.next("wait-bill")

    async def charge(s: StepContext) -> str:
        # The provider deduplicates on the key: a charge re-run after a crash is one charge.
        return await provider.charge(s.key[0], bill.body.cents, s.idempotency_key)

    charge_id: str = await ctx.step("charge", charge, limit="payments", timeout=CHARGE_TIMEOUT,
                                     max_retries=5)

    def record(s: StepContext) -> None:
        s.state.cents = bill.body.cents
        s.state.charge_id = charge_id
        s.state.paid = True

    await ctx.step("record-receipt", record)
    return charge_id


@invoice.action
def get_state(c: ActionContext) -> InvoiceState:
    return c.state


registry = setup(invoice, limits={"payments": Limit(concurrency=CONCURRENT_CHARGES, per_second=CHARGES_PER_SECOND)})
