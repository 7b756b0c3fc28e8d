"""Checkpoint-friendly loop design: each payment is one short loop iteration made of recorded
steps. The plan is computed once and recorded ("build-plan"), and the side effects happen in one
step that changes state and posts to an external ledger with the step's idempotency key. A crash
anywhere re-runs at most the unfinished step (its state changes are discarded with it, the
ledger deduplicates the repost), and finished iterations are compacted, so resuming stays cheap
however many payments went before."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup


async def _post_ledger(idempotency_key: str, payment_id: str, amount: int) -> None:
    return None


@dataclass
class Services:
    """The external ledger (injected; tests replace it)."""

    post_ledger: Callable[[str, str, int], Awaitable[None]] = _post_ledger


services = Services()


class PaymentState(BaseModel):
    applied_count: int = 0
    total_amount: int = 0
    last_payment_id: str | None = None


class Payment(BaseModel):
    id: str
    amount: int


class Plan(BaseModel):
    payment_id: str
    amount: int


checkpoint_friendly = actor("checkpoint-friendly", state=PaymentState, queues={"payments": queue(Payment)})


@checkpoint_friendly.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        batch = await loop.queue.next_batch("wait-payment", timeout=30)
        if not batch:
            return
        payment: Payment = batch[0].body

        await loop.rollback_checkpoint("apply-payment-checkpoint")
        # Recorded as JSON: replays get the same plan back, even if planning rules change.
        plan = Plan.model_validate(await loop.step(
            "build-plan", lambda _s: Plan(payment_id=payment.id, amount=payment.amount)))

        async def apply(s: StepContext) -> None:
            s.state.applied_count += 1
            s.state.total_amount += plan.amount
            s.state.last_payment_id = plan.payment_id
            await services.post_ledger(s.idempotency_key, plan.payment_id, plan.amount)

        await loop.step("apply-side-effects", apply)

    await ctx.loop("payment-loop", iteration)


@checkpoint_friendly.action
def get_state(c: ActionContext) -> PaymentState:
    return c.state


registry = setup(checkpoint_friendly)
