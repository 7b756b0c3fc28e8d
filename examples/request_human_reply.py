"""Request -> human -> reply: an expense claim is answered only once a manager has decided on it.

The employee's `send("claims", claim, wait=True)` waits for the answer. The workflow receives the claim with
`completable=True`, puts it under review (the state shows it), and waits for the manager's decision on another
queue, `decisions`, racing a review window of three days: whichever comes first decides. Then
`claim.complete(...)` answers the employee. A completable message may stay open while the workflow receives
others: it left the inbox when it was received, and its completion is recorded by message id, so it replays
on its own (docs/semantics.md, "Queues"). A decision names its claim: one for another claim (a late double
click) is ignored, never taken for the claim under review. An employee whose wait ended first asks again with
the same message id and gets the same answer; claims sent meanwhile wait their turn in the inbox.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from dormant import ActionContext, Loop, StepContext, WorkflowContext, actor, queue, setup

REVIEW_WINDOW = 3 * 24 * 3600  # seconds a manager has to decide; then the claim is declined


class Claim(BaseModel):
    employee: str
    amount: int = Field(gt=0)
    purpose: str


class ClaimAnswer(BaseModel):
    approved: bool
    decided_by: str
    note: str = ""


class Decision(BaseModel):
    claim_id: str  # the id of the claim's message (shown as `under_review.claim_id`)
    approved: bool
    manager: str
    note: str = ""


class Review(BaseModel):
    claim_id: str
    employee: str
    amount: int
    purpose: str


class DeskState(BaseModel):
    under_review: Review | None = None
    answered: list[str] = []  # claim ids, in the order they were answered
    ignored_decisions: int = 0


expense_desk = actor("expense-desk", state=DeskState,
                     queues={"claims": queue(Claim, response=ClaimAnswer), "decisions": queue(Decision)})


@expense_desk.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        claim = await loop.queue.next("take-claim", names=["claims"], completable=True)

        def open_review(s: StepContext) -> None:
            s.state.under_review = Review(claim_id=claim.id, **claim.body.model_dump())

        await loop.step("open-review", open_review)

        async def manager(branch: WorkflowContext) -> dict[str, object]:
            async def next_decision(decisions: WorkflowContext) -> object:
                decision = await decisions.queue.next("take-decision", names=["decisions"])
                if decision.body.claim_id == claim.id:
                    return Loop.break_(decision.body.model_dump())

                def ignore(s: StepContext) -> None:
                    s.state.ignored_decisions += 1

                await decisions.step("ignore-decision", ignore)
                return None

            decided: dict[str, object] = await branch.loop("decisions", next_decision)
            return decided

        async def window(branch: WorkflowContext) -> None:
            await branch.sleep("review-window", REVIEW_WINDOW)

        outcome = await loop.race("review", {"manager": manager, "window": window})
        if outcome.winner == "manager":
            decision = Decision.model_validate(outcome.value)
            answer = ClaimAnswer(approved=decision.approved, decided_by=decision.manager, note=decision.note)
        else:
            answer = ClaimAnswer(approved=False, decided_by="nobody", note="no decision within the review window")

        def close_review(s: StepContext) -> None:
            s.state.under_review = None
            s.state.answered.append(claim.id)

        await loop.step("close-review", close_review)
        assert claim.complete is not None  # always set on a completable receive
        await claim.complete(answer)

    await ctx.loop("desk", iteration)


@expense_desk.action
def get_state(c: ActionContext) -> DeskState:
    return c.state


registry = setup(expense_desk)
