"""`actor(..., workflow_timeout=...)`: the run fails with WorkflowTimeoutError once its deadline passes."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest

from dormant import StepContext, WorkflowContext, WorkflowState, WorkflowTimeoutError, actor, queue, setup
from dormant.testing import TestEnv
from dormant.workflow.errors import WorkflowDefinitionError
from tests.unit.support import Counter, Item, start

COMPENSATED: list[str] = []


def waiting_actor(name: str = "deadline") -> Any:
    a = actor(name, state=Counter, queues={"go": queue(Item)}, workflow_timeout=3600)

    def reserve(s: StepContext) -> str:
        s.state.log.append("reserved")
        return "r-1"

    def release(s: StepContext, reservation: str) -> None:
        COMPENSATED.append(reservation)
        s.state.log.append("released")

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.rollback_checkpoint("start")
        await ctx.step("reserve", reserve, rollback=release)
        message = await ctx.queue.next("wait-go")  # no message comes
        await ctx.step("ship", lambda s: s.state.log.append(message.body.n))

    return a


async def test_a_waiting_actor_fails_with_workflow_timeout_error_and_rolls_back() -> None:
    COMPENSATED.clear()
    async with TestEnv(setup(waiting_actor())) as env:
        handle = await start(env, "deadline")
        status = await handle.status()
        assert status.workflow is WorkflowState.SLEEPING and status.waiting_for.queues == ["go"]
        assert status.waiting_for.deadline == pytest.approx(env.now() + 3600)  # its timer: the deadline
        await env.advance(3599)
        assert (await handle.status()).workflow is WorkflowState.SLEEPING and COMPENSATED == []
        await env.advance(2)  # 3601 s after its start: the timer woke it
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and status.error.startswith(f"{WorkflowTimeoutError.__name__}: ")
        assert "workflow_timeout" in status.error
        assert COMPENSATED == ["r-1"]  # the rollback ran, once
        assert (await handle.state()).log == ["reserved", "released"]
        # A message after the deadline changes nothing: the workflow is over.
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        assert (await handle.state()).log == ["reserved", "released"] and COMPENSATED == ["r-1"]


async def test_a_message_that_arrives_after_the_deadline_is_not_taken() -> None:
    COMPENSATED.clear()
    async with TestEnv(setup(waiting_actor("late"))) as env:
        handle = await start(env, "late")
        env.clock.advance(3601)  # time passes with no timer fired yet; then a message wakes it
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED and status.error is not None
        assert WorkflowTimeoutError.__name__ in status.error
        assert "ship" not in {e.location for e in await handle.history()}


async def test_steps_past_the_deadline_do_not_start_and_the_error_cannot_be_caught() -> None:
    ran: list[int] = []
    a = actor("busy", state=Counter, queues={"go": queue(Item)}, workflow_timeout=timedelta(minutes=1))

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.sleep("nap", 120)  # its timer comes after the deadline's: the deadline's wakes it first
        try:
            await ctx.step("late", lambda s: ran.append(1))
        except Exception:  # what the test shows: nothing user code catches
            ran.append(-1)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "busy")
        assert (await handle.status()).waiting_for.deadline == pytest.approx(env.now() + 60)
        await env.advance(61)
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED and ran == []
        assert status.error is not None and WorkflowTimeoutError.__name__ in status.error


async def test_a_workflow_that_ends_in_time_is_not_affected() -> None:
    async with TestEnv(setup(waiting_actor("in-time"))) as env:
        handle = await start(env, "in-time")
        await env.advance(100)
        await handle.send("go", {"n": 5})
        await env.run_until_idle()
        assert (await handle.status()).workflow is WorkflowState.COMPLETED
        await env.advance(3600)  # the stale deadline timer is harmless
        assert (await handle.status()).workflow is WorkflowState.COMPLETED


@pytest.mark.parametrize("timeout", [0, -1, math.inf, math.nan, timedelta(0), "60", True])
def test_the_option_is_validated(timeout: Any) -> None:
    with pytest.raises(WorkflowDefinitionError, match="workflow_timeout"):
        actor("bad", workflow_timeout=timeout)


def test_the_option_takes_seconds_or_a_timedelta() -> None:
    assert actor("secs", workflow_timeout=90).workflow_timeout == 90.0
    assert actor("delta", workflow_timeout=timedelta(hours=1)).workflow_timeout == 3600.0
    assert actor("none").workflow_timeout is None
