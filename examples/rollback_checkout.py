"""Rollback: compensate completed steps when a later one fails for good. Each order sets a rollback
checkpoint, then reserves inventory and charges the card, each step with a handler that undoes it. When a
step fails unrecoverably (a declined card, or a confirmation that fails after the charge), the handlers of
the steps completed since the checkpoint run newest first (refund, then release), exactly once each, and
the workflow ends "failed". Orders finished earlier are not touched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup


class Order(BaseModel):
    order_id: str


class CheckoutState(BaseModel):
    status: str = "pending"
    confirmed: list[str] = Field(default_factory=list)


async def _reserve_inventory(order_id: str) -> str:
    return f"res-{order_id}"


async def _release_inventory(reservation_id: str) -> None:
    return None


async def _charge_card(order_id: str) -> str:
    return f"ch-{order_id}"


async def _refund_charge(charge_id: str) -> None:
    return None


async def _confirm_order(order_id: str) -> None:
    return None


@dataclass
class Services:
    """Inventory and payments (HTTP in the original); tests replace them with fakes."""

    reserve_inventory: Callable[[str], Awaitable[str]] = _reserve_inventory
    release_inventory: Callable[[str], Awaitable[None]] = _release_inventory
    charge_card: Callable[[str], Awaitable[str]] = _charge_card
    refund_charge: Callable[[str], Awaitable[None]] = _refund_charge
    confirm_order: Callable[[str], Awaitable[None]] = _confirm_order


services = Services()

checkout = actor("checkout", state=CheckoutState, queues={"orders": queue(Order)})


async def release(s: StepContext, reservation_id: Any) -> None:
    await services.release_inventory(reservation_id)


async def refund(s: StepContext, charge_id: Any) -> None:
    await services.refund_charge(charge_id)


@checkout.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-order")
        order_id = message.body.order_id
        await loop.rollback_checkpoint("checkout-checkpoint")

        await loop.step("reserve-inventory", lambda s: services.reserve_inventory(order_id), rollback=release)
        await loop.step("charge-card", lambda s: services.charge_card(order_id), rollback=refund)

        async def confirm(s: StepContext) -> None:
            await services.confirm_order(order_id)  # may fail for good after the charge: both are undone
            s.state.status = "confirmed"
            s.state.confirmed.append(order_id)

        await loop.step("confirm", confirm)

    await ctx.loop("checkout-loop", iteration)


@checkout.action
def get_state(c: ActionContext) -> CheckoutState:
    return c.state


registry = setup(checkout)
