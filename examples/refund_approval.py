"""Refund approval by email: a callback a person completes from a link. The workflow takes a refund request,
opens a callback declared `callback(Approval, description=...)`, mails its `approval_url` to a manager in a step,
and waits durably (three days) for the decision. Opening the link shows a confirmation page and decides nothing
(mail scanners prefetch links); its Approve or Reject button posts the decision, and `result()` returns
`Approval(approved=...)`. Nobody decides in time: the refund is declined as expired.

Try it on `dormant dev --app examples.refund_approval:registry`:

    dormant send refund-request r-1 request '{"order": "order-7", "amount_cents": 4200}'

then open the URL the default mailer logs, in a browser.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel, Field

from dormant import Approval, CallbackTimeoutError, StepContext, WorkflowContext, actor, callback, queue, setup

log = logging.getLogger("examples.refund_approval")
DECISION_TIMEOUT = 3 * 24 * 3600.0


async def _log_mail(to: str, subject: str, link: str) -> None:
    """Stands in for a mail service: logs the link to open by hand."""
    log.warning("mail to %s: %s: %s", to, subject, link)


@dataclass
class Services:
    """The mailer (injected; tests replace it)."""

    send_mail: Callable[[str, str, str], Awaitable[None]] = _log_mail


services = Services()


class RefundRequest(BaseModel):
    order: str = Field(min_length=1, max_length=64)
    amount_cents: int = Field(gt=0)


class RefundState(BaseModel):
    status: str = "new"  # new -> awaiting_approval -> refunded | rejected | expired
    order: str = ""
    amount_cents: int = 0


refunds = actor("refund-request", state=RefundState, queues={"request": queue(RefundRequest)},
                callbacks={"manager": callback(Approval, description="A customer asks for a refund: approve it?")})


@refunds.workflow
async def run(ctx: WorkflowContext) -> str:
    request = (await ctx.queue.next("wait-request")).body
    approval = await ctx.callback("manager", timeout=DECISION_TIMEOUT)  # stored: the link works once mailed

    async def ask(s: StepContext) -> None:
        s.state.order, s.state.amount_cents, s.state.status = request.order, request.amount_cents, "awaiting_approval"
        await services.send_mail("manager@example.com", f"Refund {request.amount_cents} cents for {request.order}?",
                                 approval.approval_url)

    await ctx.step("ask-manager", ask)
    try:
        outcome = "refunded" if (await approval.result()).approved else "rejected"
    except CallbackTimeoutError:
        outcome = "expired"

    def record(s: StepContext) -> None:
        s.state.status = outcome

    await ctx.step("record-decision", record)
    return outcome


registry = setup(refunds)
