"""Changing a workflow under running actors, and bounding it: v1 of this order workflow reserved stock, packed it,
waited for the payment and shipped. v2 adds a best-effort audit between "reserve" and "pack":

- `ctx.get_version("add-audit", 2)` is 2 for orders that reach that point under v2 and 1 for orders that had
  already packed under v1 (their history holds "pack" after it), so old orders replay without diverging and skip
  the audit, while new ones run it;
- the audit is a `ctx.try_step`: when the audit service stays down through its retries the failure comes back as
  a value (`StepResult.failure.kind == "exhausted"`) and the order goes on, noting it;
- the price quote the audit needs is an `ephemeral` step: cheap and idempotent, it rides with the next commit
  instead of costing one of its own (a crash before that commit runs it again);
- every version has `workflow_timeout=DAY`: an order not paid within a day of its creation fails with
  `WorkflowTimeoutError`, and the rollback releases its reservation.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

from dormant import ActionContext, ActorDefinition, StepContext, WorkflowContext, actor, queue, setup

ACTOR = "evolving-order"
DAY = timedelta(days=1)
AUDIT_RETRIES = 2


class Payment(BaseModel):
    amount: int


class OrderState(BaseModel):
    log: list[str] = []
    price: int | None = None
    audit: str | None = None  # "passed", or why it was skipped


class AuditService:
    """The outside audit service (tests take it down)."""

    up = True


def get_state(c: ActionContext) -> OrderState:
    return c.state


def define() -> ActorDefinition:
    definition = actor(ACTOR, state=OrderState, queues={"payments": queue(Payment)}, workflow_timeout=DAY)
    definition.action(get_state)
    return definition


def reserve(s: StepContext) -> str:
    s.state.log.append("reserved")
    return f"reservation-{s.idempotency_key[:8]}"


def release(s: StepContext, reservation: str) -> None:
    s.state.log.append("released")


def pack(s: StepContext) -> None:
    s.state.log.append("packed")


def ship(s: StepContext) -> None:
    s.state.log.append("shipped")


def quote(s: StepContext) -> int:
    s.state.price = 42
    return 42


def audit(s: StepContext) -> str:
    if not AuditService.up:
        raise ConnectionError("audit service unavailable")
    s.state.audit = "passed"
    return "passed"


# -- v1: what older orders recorded ------------------------------------------------------------
v1 = define()


@v1.workflow
async def run_v1(ctx: WorkflowContext) -> None:
    await ctx.rollback_checkpoint("start")
    await ctx.step("reserve", reserve, rollback=release)
    await ctx.step("pack", pack)
    await ctx.queue.next("wait-payment")  # (its only queue)
    await ctx.step("ship", ship)


registry_v1 = setup(v1)


# -- v2: the current code ----------------------------------------------------------------------
v2 = define()


@v2.workflow
async def run(ctx: WorkflowContext) -> None:
    await ctx.rollback_checkpoint("start")
    await ctx.step("reserve", reserve, rollback=release)
    if await ctx.get_version("add-audit", 2) >= 2:
        price = await ctx.step("quote", quote, ephemeral=True)
        result = await ctx.try_step("audit", audit, max_retries=AUDIT_RETRIES, retry_backoff_base=1)
        if not result.ok and result.failure is not None:
            why = f"skipped after {result.failure.attempts} attempts ({result.failure.error.message}) at {price}"

            def note(s: StepContext) -> None:
                s.state.audit = why

            await ctx.step("note-audit", note)
    await ctx.step("pack", pack)
    await ctx.queue.next("wait-payment")  # (its only queue)
    await ctx.step("ship", ship)


registry = setup(v2)
