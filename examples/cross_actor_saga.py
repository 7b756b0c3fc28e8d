"""Cross-actor saga (compensating actions): each checkout reserves stock on an inventory actor
and charges a billing actor, each in a step with a rollback handler. If a step fails for good,
the workflow fails and the handlers of the completed steps run newest-first: the charge is
refunded, then the reservation released (a failure at the charge itself only releases). Release
and refund are idempotent, keyed by the reservation/charge id, so a compensation that is retried
never undoes twice."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel

from dormant import ActionContext, NonRetryableError, StepContext, WorkflowContext, actor, queue, setup

DECLINE_ABOVE = 1_000


async def _charge_card(order_id: str, amount: int) -> None:
    """The default (fake) payment gateway declines large charges, so the saga has something to compensate."""
    if amount > DECLINE_ABOVE:
        raise NonRetryableError(f"card declined: {amount} is over the {DECLINE_ABOVE} limit")


async def _confirm_order(order_id: str) -> None:
    return None


@dataclass
class Services:
    """The payment gateway behind the billing actor and the order service that confirms a checkout
    (injected; tests replace them)."""

    charge_card: Callable[[str, int], Awaitable[None]] = _charge_card
    confirm_order: Callable[[str], Awaitable[None]] = _confirm_order


services = Services()


class InventoryState(BaseModel):
    reservations: dict[str, str] = {}  # reservation id -> order id
    released: list[str] = []


inventory = actor("inventory", state=InventoryState)


@inventory.action
def reserve(c: ActionContext, order_id: str) -> str:
    reservation_id = f"reserve-{order_id}"
    c.state.reservations[reservation_id] = order_id
    return reservation_id


@inventory.action
def release(c: ActionContext, reservation_id: str) -> bool:
    """Idempotent: releasing twice (or releasing nothing) changes nothing."""
    if c.state.reservations.pop(reservation_id, None) is None:
        return False
    c.state.released.append(reservation_id)
    return True


@inventory.action(name="get_state")
def get_inventory_state(c: ActionContext) -> InventoryState:
    return c.state


class BillingState(BaseModel):
    charges: dict[str, int] = {}  # charge id -> amount
    refunded: list[str] = []


billing = actor("billing", state=BillingState)


@billing.action
async def charge(c: ActionContext, order_id: str, amount: int) -> str:
    await services.charge_card(order_id, amount)
    charge_id = f"charge-{order_id}"
    c.state.charges[charge_id] = amount
    return charge_id


@billing.action
def refund(c: ActionContext, charge_id: str) -> bool:
    """Idempotent, like `release`."""
    if c.state.charges.pop(charge_id, None) is None:
        return False
    c.state.refunded.append(charge_id)
    return True


@billing.action(name="get_state")
def get_billing_state(c: ActionContext) -> BillingState:
    return c.state


class SagaState(BaseModel):
    completed_orders: int = 0


class Checkout(BaseModel):
    order_id: str
    amount: int


checkout_saga = actor("checkout-saga", state=SagaState, queues={"orders": queue(Checkout)})


async def call(s: StepContext, actor_name: str, action: str, *args: object) -> object:
    return await s.client().get_or_create(actor_name, ["main"]).call(action, *args)


@checkout_saga.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        batch = await loop.queue.next_batch("wait-order", timeout=30)
        if not batch:
            return
        order: Checkout = batch[0].body

        await loop.rollback_checkpoint("checkout-saga")
        await loop.step("reserve-inventory", lambda s: call(s, "inventory", "reserve", order.order_id),
                        rollback=lambda s, reservation_id: call(s, "inventory", "release", reservation_id))
        await loop.step("charge-card", lambda s: call(s, "billing", "charge", order.order_id, order.amount),
                        rollback=lambda s, charge_id: call(s, "billing", "refund", charge_id))

        async def mark_complete(s: StepContext) -> None:
            await services.confirm_order(order.order_id)  # failing for good here refunds, then releases
            s.state.completed_orders += 1

        await loop.step("mark-complete", mark_complete)

    await ctx.loop("checkout-loop", iteration)


@checkout_saga.action
def get_state(c: ActionContext) -> SagaState:
    return c.state


registry = setup(checkout_saga, inventory, billing)
