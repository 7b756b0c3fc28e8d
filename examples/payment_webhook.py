"""Payment webhook: a callback an outside system completes. The workflow takes an order, creates a callback
(`ctx.callback`), hands its URL to the payment provider as the webhook in a step, and waits durably for the
provider's `POST /callbacks/{token}`: `{"result": {...}}` when the customer paid, `{"error": {...}}` when the
payment was declined. Nobody pays within a day: the callback times out and the order expires. The provider
knows no actor key and has no identity the API could check: the token in the URL is its authorization (single
use, expiring), and the result must match `PaymentResult` before anything is stored.

Try it on `dormant dev --app examples.app:registry`:

    dormant send payment-checkout order-1 order '{"amount_cents": 4200}'
    dormant callback complete TOKEN --result '{"status": "paid", "amount_cents": 4200, "reference": "pay_1"}'

The token is on the dashboard's actor page (dev mode only), and the default provider below logs the webhook URL.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from dormant import (
    CallbackFailedError,
    CallbackTimeoutError,
    StepContext,
    WorkflowContext,
    actor,
    callback,
    queue,
    setup,
)

log = logging.getLogger("examples.payment_webhook")
PAYMENT_TIMEOUT = 24 * 3600.0  # a checkout link stays valid for a day


async def _hosted_checkout(order_id: str, amount_cents: int, webhook_url: str, idempotency_key: str) -> str:
    """Stands in for a provider's "create payment" call: it would show the customer a payment page and post
    the outcome to `webhook_url`. Here it logs the URL, to post by hand (curl, `dormant callback complete`)."""
    log.warning("payment of %d cents for order %s: the provider will POST the outcome to %s", amount_cents,
                order_id, webhook_url)
    return f"chk_{idempotency_key[:12]}"


@dataclass
class Services:
    """The payment provider (injected; tests replace it)."""

    create_payment: Callable[[str, int, str, str], Awaitable[str]] = _hosted_checkout


services = Services()


class Order(BaseModel):
    amount_cents: int = Field(gt=0)


class PaymentResult(BaseModel):
    """What the provider's webhook carries when the customer paid (checked before anything is stored)."""

    status: Literal["paid"]
    amount_cents: int = Field(gt=0)
    reference: str = Field(min_length=1, max_length=200)


class CheckoutState(BaseModel):
    status: str = "new"  # new -> awaiting_payment -> paid | declined | expired | amount_mismatch
    checkout_id: str = ""
    amount_cents: int = 0
    reference: str = ""
    reason: str = ""


checkout = actor("payment-checkout", state=CheckoutState, queues={"order": queue(Order)},
                 callbacks={"payment": callback(PaymentResult)})


@checkout.workflow
async def run(ctx: WorkflowContext) -> str:
    order = (await ctx.queue.next("wait-order")).body
    # Stored when this returns: the step below may hand its URL out, and a replay hands out the same one.
    payment = await ctx.callback("payment", timeout=PAYMENT_TIMEOUT)

    async def start_payment(s: StepContext) -> None:
        # At least once: a re-run step sends the same webhook URL with the same idempotency key.
        s.state.checkout_id = await services.create_payment(s.key[0], order.amount_cents, payment.url,
                                                            s.idempotency_key)
        s.state.amount_cents = order.amount_cents
        s.state.status = "awaiting_payment"

    await ctx.step("start-payment", start_payment)
    try:
        paid: PaymentResult = await payment.result()
    except CallbackFailedError as declined:  # the provider posted {"error": {"type": ..., "message": ...}}
        outcome, reason, reference = "declined", f"{declined.error_type}: {declined.error_message}", ""
    except CallbackTimeoutError:
        outcome, reason, reference = "expired", "no payment within a day", ""
    else:
        matches = paid.amount_cents == order.amount_cents
        outcome = "paid" if matches else "amount_mismatch"
        reason = "" if matches else f"paid {paid.amount_cents} cents of {order.amount_cents}"
        reference = paid.reference

    def record(s: StepContext) -> None:
        s.state.status, s.state.reason, s.state.reference = outcome, reason, reference

    await ctx.step("record-outcome", record)
    return outcome


registry = setup(checkout)
