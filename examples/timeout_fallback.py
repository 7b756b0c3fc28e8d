"""Timeout + fallback actor: each request races a call to a primary actor against a 200 ms timer. A
primary that answers first wins; a primary slower than the timer loses when the timer fires, even
though its call is still running (the call is cancelled and recorded as such), and the workflow asks a
fallback actor instead. The race's winner and the choice are recorded, so a replay chooses the same.
(The reference also races when its 30 s idle wait ended without a request; here an empty wait just
loops.)"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup

FALLBACK_AFTER = 0.2  # seconds the primary has before the fallback is used


async def _primary_value() -> str:
    return "primary"


async def _fallback_value() -> str:
    return "fallback"


@dataclass
class Services:
    """The backends behind the two service actors (injected; tests replace them)."""

    primary_value: Callable[[], Awaitable[str]] = _primary_value
    fallback_value: Callable[[], Awaitable[str]] = _fallback_value


services = Services()

primary_service = actor("primary-service")
fallback_service = actor("fallback-service")


@primary_service.action(name="fetch_value")
async def fetch_primary(c: ActionContext) -> str:
    return await services.primary_value()


@fallback_service.action(name="fetch_value")
async def fetch_fallback(c: ActionContext) -> str:
    return await services.fallback_value()


class ChoiceState(BaseModel):
    last_source: Literal["none", "primary", "fallback"] = "none"
    last_value: str = ""


class Request(BaseModel):
    pass


timeout_fallback = actor("timeout-fallback", state=ChoiceState, queues={"requests": queue(Request)})


async def call_service(s: StepContext, name: str) -> str:
    return await s.client().get_or_create(name, ["main"]).call("fetch_value")


@timeout_fallback.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        if not await loop.queue.next_batch("wait-request", timeout=30):
            return

        async def primary(branch: WorkflowContext) -> str:
            return await branch.step("call-primary", lambda s: call_service(s, "primary-service"))

        async def timer(branch: WorkflowContext) -> str:
            await branch.sleep("primary-timeout", FALLBACK_AFTER)
            return "timeout"

        winner = await loop.race("primary-vs-timeout", {"primary": primary, "timeout": timer})
        source, value = "primary", winner.value
        if winner.winner == "timeout":
            source = "fallback"
            value = await loop.step("fallback-call", lambda s: call_service(s, "fallback-service"))

        def record(s: StepContext) -> None:
            s.state.last_source = source
            s.state.last_value = value

        await loop.step("record-choice", record)

    await ctx.loop("timeout-loop", iteration)


@timeout_fallback.action
def get_state(c: ActionContext) -> ChoiceState:
    return c.state


registry = setup(timeout_fallback, primary_service, fallback_service)
