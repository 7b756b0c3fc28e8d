"""Join: independent fetches run in parallel and the workflow continues when all are done. Each
`refresh` message runs three branches (users, orders, revenue), each a recorded step, and saves the
combined summary. A branch that fails and is retried does not re-run the branches that already finished.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup


class Refresh(BaseModel):
    pass


class Summary(BaseModel):
    users: int
    orders: int
    revenue: int


class DashboardState(BaseModel):
    summary: Summary | None = None


async def _fetch_count(path: str) -> int:
    return {"/users": 120, "/orders": 45, "/revenue": 9800}.get(path, 0)


@dataclass
class Services:
    """The metrics API (HTTP in the original); tests replace it with a fake."""

    fetch_count: Callable[[str], Awaitable[int]] = _fetch_count


services = Services()

dashboard = actor("dashboard", state=DashboardState, queues={"refresh": queue(Refresh)})


def fetch(step_name: str, path: str) -> Callable[[WorkflowContext], Awaitable[int]]:
    """A join branch that fetches one count in one step."""
    async def branch(branch_ctx: WorkflowContext) -> int:
        return await branch_ctx.step(step_name, lambda s: services.fetch_count(path))
    return branch


@dashboard.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        await loop.queue.next("wait-refresh")
        summary = await loop.join("fetch-summary", {
            "users": fetch("fetch-users", "/users"),
            "orders": fetch("fetch-orders", "/orders"),
            "revenue": fetch("fetch-revenue", "/revenue"),
        })

        def save_summary(s: StepContext) -> None:
            s.state.summary = Summary(**summary)

        await loop.step("save-summary", save_summary)

    await ctx.loop("dashboard-loop", iteration)


@dashboard.action
def get_state(c: ActionContext) -> DashboardState:
    return c.state


registry = setup(dashboard)
