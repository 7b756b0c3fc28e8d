"""Setup & teardown (vars and hooks): per-wake-up resources live in `vars`, never in state. `vars` is a
factory, so each wake-up starts with fresh vars; `on_wake` opens a connection into them and `on_sleep`
closes it when the wake-up ends, so a sleeping actor holds nothing open. Steps use the connection through
`s.vars`; the workflow here ticks once a second with a durable sleep.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel

from dormant import ActionContext, HookContext, StepContext, WorkflowContext, actor, setup

TICK_SECONDS = 1.0


@dataclass
class Connection:
    """Stands in for a client session, socket or pool: something to open and close, never to persist."""

    name: str
    uses: int = 0
    closed: bool = False


async def _open_resource() -> Connection:
    return Connection("connected")


async def _close_resource(resource: Connection) -> None:
    resource.closed = True


@dataclass
class Services:
    """How connections are opened and closed; tests replace it with a counting factory."""

    open_resource: Callable[[], Awaitable[Connection]] = _open_resource
    close_resource: Callable[[Connection], Awaitable[None]] = _close_resource


services = Services()


@dataclass
class WorkerVars:
    resource: Connection | None = None


class TickerState(BaseModel):
    initialized: bool = False
    ticks: int = 0


ticker = actor("vars-hooks", state=TickerState, vars=WorkerVars)


@ticker.on_wake
async def open_resource(c: HookContext) -> None:
    c.vars.resource = await services.open_resource()


@ticker.on_sleep
async def close_resource(c: HookContext) -> None:
    if c.vars.resource is None:
        return
    await services.close_resource(c.vars.resource)
    c.vars.resource = None


@ticker.workflow
async def run(ctx: WorkflowContext) -> None:
    async def initialize(s: StepContext) -> None:
        if s.vars.resource is None:
            s.vars.resource = await services.open_resource()
        s.state.initialized = True

    await ctx.step("setup", initialize)

    async def iteration(loop: WorkflowContext) -> None:
        await loop.sleep("tick", TICK_SECONDS)

        def tick(s: StepContext) -> None:
            s.vars.resource.uses += 1
            s.state.ticks += 1

        await loop.step("tick-step", tick)

    await ctx.loop("main-loop", iteration)


@ticker.action
def get_state(c: ActionContext) -> TickerState:
    return c.state


registry = setup(ticker)
