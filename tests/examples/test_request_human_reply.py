"""Request -> human -> reply: a claim's waiting send is answered by the manager's decision, or declined when
the review window passes; stray decisions never decide another claim; answers survive waits and redeploys."""

from __future__ import annotations

import asyncio
from typing import Any

from dormant.testing import TestEnv
from examples.request_human_reply import REVIEW_WINDOW, registry

DAY = 24 * 3600
GUARD = 20.0  # real seconds: a wait that should end does, or the test fails


def claim(amount: int = 120, purpose: str = "train to the client") -> dict[str, Any]:
    return {"employee": "ana", "amount": amount, "purpose": purpose}


async def test_the_claim_is_answered_with_the_managers_decision() -> None:
    async with TestEnv(registry) as env:
        desk = env.client.get_or_create("expense-desk", ["team-7"])
        waiting = asyncio.create_task(desk.send("claims", claim(), wait=True, timeout=4 * DAY, message_id="c-1"))
        await env.run_until_idle()
        state = await desk.call("get_state")
        assert state.under_review is not None
        assert (state.under_review.claim_id, state.under_review.amount) == ("c-1", 120)
        assert not waiting.done()  # the employee waits for a person

        await env.advance(DAY)  # the manager takes a day
        await desk.send("decisions", {"claim_id": "c-1", "approved": True, "manager": "lee", "note": "ok"})
        result = await asyncio.wait_for(waiting, GUARD)
        assert (result.status, result.response) == ("completed", {"approved": True, "decided_by": "lee",
                                                                  "note": "ok"})
        await env.run_until_idle()
        state = await desk.call("get_state")
        assert (state.under_review, state.answered) == (None, ["c-1"])


async def test_without_a_decision_the_claim_is_declined_when_the_window_ends() -> None:
    async with TestEnv(registry) as env:
        desk = env.client.get_or_create("expense-desk", ["team-7"])
        waiting = asyncio.create_task(desk.send("claims", claim(), wait=True, timeout=4 * DAY))
        await env.run_until_idle()
        await env.advance(REVIEW_WINDOW - 1)
        assert not waiting.done()
        await env.advance(1)
        result = await asyncio.wait_for(waiting, GUARD)
        assert result.status == "completed"
        assert result.response == {"approved": False, "decided_by": "nobody",
                                   "note": "no decision within the review window"}


async def test_claims_wait_their_turn_and_stray_decisions_decide_nothing() -> None:
    async with TestEnv(registry) as env:
        desk = env.client.get_or_create("expense-desk", ["team-7"])
        stray = {"claim_id": "c-0", "approved": True, "manager": "lee"}
        await desk.send("decisions", stray)  # a decision with no claim under review: it waits, then is ignored
        first = asyncio.create_task(desk.send("claims", claim(40), wait=True, timeout=4 * DAY, message_id="c-1"))
        await env.run_until_idle()  # (two sends started together may be stored in either order)
        second = asyncio.create_task(desk.send("claims", claim(900), wait=True, timeout=4 * DAY,
                                               message_id="c-2"))
        await env.run_until_idle()
        state = await desk.call("get_state")
        assert state.under_review is not None and state.under_review.claim_id == "c-1"  # c-2 waits its turn

        await desk.send("decisions", {"claim_id": "c-1", "approved": True, "manager": "lee"})
        await desk.send("decisions", {"claim_id": "c-1", "approved": True, "manager": "lee"})  # a double click
        assert (await asyncio.wait_for(first, GUARD)).response["approved"] is True
        await env.run_until_idle()
        state = await desk.call("get_state")
        assert state.under_review is not None and state.under_review.claim_id == "c-2"
        assert not second.done()  # neither stray decision was taken for c-2

        await desk.send("decisions", {"claim_id": "c-2", "approved": False, "manager": "kim", "note": "too much"})
        result = await asyncio.wait_for(second, GUARD)
        assert result.response == {"approved": False, "decided_by": "kim", "note": "too much"}
        await env.run_until_idle()
        state = await desk.call("get_state")
        assert (state.answered, state.ignored_decisions) == (["c-1", "c-2"], 2)


async def test_an_employee_whose_wait_ended_gets_the_same_answer_later_even_after_a_redeploy() -> None:
    async with TestEnv(registry) as env:
        desk = env.client.get_or_create("expense-desk", ["team-7"])
        waiting = asyncio.create_task(desk.send("claims", claim(), wait=True, timeout=60, message_id="c-9"))
        await env.run_until_idle()
        await env.advance(60)  # the employee's client gives up after a minute; the claim stays under review
        result = await asyncio.wait_for(waiting, GUARD)
        assert result.status == "timedOut"

    async with TestEnv(registry, store=env.store) as again:  # a new deploy while the claim is open
        desk = again.client.get_or_create("expense-desk", ["team-7"])
        await desk.send("decisions", {"claim_id": "c-9", "approved": True, "manager": "lee"})
        await again.run_until_idle()
        answer = await asyncio.wait_for(desk.send("claims", claim(), wait=True, timeout=60, message_id="c-9"),
                                        GUARD)
        assert (answer.status, answer.response["decided_by"]) == ("completed", "lee")
        assert (await desk.call("get_state")).answered == ["c-9"]  # the same id is the same claim: answered once
