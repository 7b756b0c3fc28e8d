"""Simple workflow: a short, fixed sequence of durable steps (load a subtotal, quote the tax, save the
invoice). Each step's result is recorded, so a crash or a failed attempt never re-runs a finished step:
a retried `calculate-tax` sees the subtotal `load-subtotal` recorded, without loading it again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, setup


class InvoiceState(BaseModel):
    invoice_id: str | None = None
    subtotal: float = 0.0
    tax: float = 0.0
    total: float = 0.0
    status: Literal["idle", "complete"] = "idle"


async def _load_subtotal() -> float:
    return 100.0


async def _calculate_tax(subtotal: float) -> float:
    return round(subtotal * 0.08, 2)


async def _save_invoice(subtotal: float, tax: float, total: float) -> str:
    return f"inv-{int(total * 100)}"


@dataclass
class Services:
    """The external calls (HTTP in the original); tests replace them with fakes."""

    load_subtotal: Callable[[], Awaitable[float]] = _load_subtotal
    calculate_tax: Callable[[float], Awaitable[float]] = _calculate_tax
    save_invoice: Callable[[float, float, float], Awaitable[str]] = _save_invoice


services = Services()

invoice = actor("invoice", state=InvoiceState)


@invoice.workflow
async def run(ctx: WorkflowContext) -> None:
    subtotal: float = await ctx.step("load-subtotal", lambda s: services.load_subtotal())
    tax: float = await ctx.step("calculate-tax", lambda s: services.calculate_tax(subtotal))

    async def save_invoice(s: StepContext) -> None:
        total = subtotal + tax
        s.state.invoice_id = await services.save_invoice(subtotal, tax, total)
        s.state.subtotal, s.state.tax, s.state.total = subtotal, tax, total
        s.state.status = "complete"

    await ctx.step("save-invoice", save_invoice)


@invoice.action
def get_state(c: ActionContext) -> InvoiceState:
    return c.state


registry = setup(invoice)
