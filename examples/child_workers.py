"""Child worker orchestration: an orchestrator starts three child worker actors, fans every
batch out to them in a join (one step per child) and reconciles their results; on `shutdown`
it stops the children and ends. Children refuse work until started, so the lifecycle order
is part of what the workflow guarantees."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from dormant import ActionContext, Loop, StepContext, WorkflowContext, actor, queue, setup

CHILDREN = {"a": "child-a", "b": "child-b", "c": "child-c"}  # join branch -> child actor key


class ChildState(BaseModel):
    running: bool = False
    processed: int = 0


child_worker = actor("child-worker", state=ChildState)


@child_worker.action
def start(c: ActionContext) -> None:
    c.state.running = True


@child_worker.action
def stop(c: ActionContext) -> None:
    c.state.running = False


@child_worker.action
def process(c: ActionContext, payload: int) -> int:
    if not c.state.running:
        raise RuntimeError(f"child {c.key[0]} is not running")
    c.state.processed += 1
    return payload * 3


@child_worker.action(name="get_state")
def get_child_state(c: ActionContext) -> ChildState:
    return c.state


class OrchestratorState(BaseModel):
    last_total: int = 0
    batches: int = 0


class Batch(BaseModel):
    payload: int


class Shutdown(BaseModel):
    pass


orchestrator = actor("orchestrator", state=OrchestratorState,
                     queues={"batches": queue(Batch), "shutdown": queue(Shutdown)})


async def tell_children(s: StepContext, action: str) -> None:
    for key in CHILDREN.values():
        await s.client().get_or_create("child-worker", [key]).call(action)


def run_child(key: str, payload: int) -> Callable[[WorkflowContext], Awaitable[int]]:
    async def branch(b: WorkflowContext) -> int:
        async def call(s: StepContext) -> int:
            return await s.client().get_or_create("child-worker", [key]).call("process", payload)
        return await b.step(f"run-{key}", call)
    return branch


@orchestrator.workflow
async def run(ctx: WorkflowContext) -> None:
    await ctx.step("start-children", lambda s: tell_children(s, "start"))

    async def iteration(loop: WorkflowContext) -> Any:
        batch = await loop.queue.next_batch("wait-batch", timeout=30)
        if not batch:
            return None
        if batch[0].name == "shutdown":
            return Loop.break_()
        payload = batch[0].body.payload

        results = await loop.join("collect-updates",
                                  {branch: run_child(key, payload) for branch, key in CHILDREN.items()})

        def reconcile(s: StepContext) -> None:
            s.state.last_total = sum(results.values())
            s.state.batches += 1

        await loop.step("reconcile", reconcile)
        return None

    await ctx.loop("orchestrate-loop", iteration)
    await ctx.step("stop-children", lambda s: tell_children(s, "stop"))


@orchestrator.action
def get_state(c: ActionContext) -> OrchestratorState:
    return c.state


registry = setup(orchestrator, child_worker)
