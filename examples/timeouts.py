"""Timeouts: a slow or flaky dependency gets a per-attempt timeout and bounded retries. Each attempt
of `charge-card` is cancelled after `CHARGE_TIMEOUT` seconds and counts as a failure; failures retry
with exponential backoff, durably (the actor sleeps between attempts): base 0.2 s, so as in RivetKit the
retries wait 0.4, 0.8, 1.6, 2.0 and 2.0 s (capped). After 5 retries `StepExhaustedError` fails the
workflow and shows in its status.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup

CHARGE_TIMEOUT = 5.0  # seconds per attempt


class Charge(BaseModel):
    order_id: str


class ChargeState(BaseModel):
    last_charge_id: str | None = None


async def _charge_card(order_id: str) -> str:
    return f"charge-{order_id}"


@dataclass
class Services:
    """The payment provider (HTTP in the original); tests replace it with slow or failing fakes."""

    charge_card: Callable[[str], Awaitable[str]] = _charge_card


services = Services()

charges = actor("timeout-charge", state=ChargeState, queues={"charge": queue(Charge)})


@charges.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-charge")
        charge_id = await loop.step("charge-card", lambda s: services.charge_card(message.body.order_id),
                                    timeout=CHARGE_TIMEOUT, max_retries=5,
                                    retry_backoff_base=0.2, retry_backoff_max=2.0)

        def save_charge(s: StepContext) -> None:
            s.state.last_charge_id = charge_id

        await loop.step("save-charge", save_charge)

    await ctx.loop("charge-loop", iteration)


@charges.action
def get_state(c: ActionContext) -> ChargeState:
    return c.state


registry = setup(charges)
