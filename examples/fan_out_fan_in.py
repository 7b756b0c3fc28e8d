"""Fan-out / fan-in (join): on each `refresh` message the workflow fetches three counts in
parallel branches of one join and merges them into `total`. Each branch is a retried step; if a
branch still fails, the join raises `JoinError` with every branch's error, which the workflow
records in state instead of failing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from dormant import ActionContext, JoinError, StepContext, WorkflowContext, actor, queue, setup


async def _fetch_count(path: str) -> int:
    return {"/users": 3, "/orders": 5, "/invoices": 7}[path]


@dataclass
class Services:
    """External counting API (injected; tests replace it)."""

    fetch_count: Callable[[str], Awaitable[int]] = _fetch_count


services = Services()


class DashboardState(BaseModel):
    total: int = 0
    refreshes: int = 0
    last_errors: dict[str, str] = {}


class Refresh(BaseModel):
    pass


fan_in = actor("fan-out-fan-in", state=DashboardState, queues={"refresh": queue(Refresh)})


def fetch(path: str) -> Callable[[WorkflowContext], Awaitable[int]]:
    """A join branch: one retried step that fetches the count at `path`."""
    async def branch(b: WorkflowContext) -> int:
        return await b.step(f"fetch-{path.strip('/')}", lambda _s: services.fetch_count(path))
    return branch


@fan_in.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        if not await loop.queue.next_batch("wait-refresh", timeout=30):
            return

        try:
            joined: dict[str, Any] = await loop.join("parallel-work", {
                "users": fetch("/users"), "orders": fetch("/orders"), "invoices": fetch("/invoices")})
        except JoinError as failure:
            errors = {branch: str(error) for branch, error in failure.errors.items()}

            def record_failure(s: StepContext) -> None:
                s.state.last_errors = errors

            await loop.step("record-failure", record_failure)
            return

        def merge(s: StepContext) -> None:
            s.state.total = joined["users"] + joined["orders"] + joined["invoices"]
            s.state.refreshes += 1
            s.state.last_errors = {}

        await loop.step("merge-results", merge)

    await ctx.loop("join-loop", iteration)


@fan_in.action
def get_state(c: ActionContext) -> DashboardState:
    return c.state


registry = setup(fan_in)
