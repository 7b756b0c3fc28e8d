"""Scatter-gather across actors: for each request the workflow calls three shard actors in
parallel (one join branch and one step per shard) and sums their answers. Each shard's answer
is recorded by its step, so a replay gathers without calling the shards again."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup

SHARDS = ("a", "b", "c")


class ShardState(BaseModel):
    calls: int = 0


shard = actor("shard", state=ShardState)


@shard.action
def compute(c: ActionContext, value: int) -> int:
    c.state.calls += 1
    return value * 10


@shard.action(name="get_state")
def get_shard_state(c: ActionContext) -> ShardState:
    return c.state


class GatherState(BaseModel):
    last_sum: int = 0
    last_parts: dict[str, int] = {}


class Scatter(BaseModel):
    input: int


scatter_gather = actor("scatter-gather", state=GatherState, queues={"scatter": queue(Scatter)})


def call_shard(shard_id: str, value: int) -> Callable[[WorkflowContext], Awaitable[int]]:
    async def branch(b: WorkflowContext) -> int:
        async def call(s: StepContext) -> int:
            return await s.client().get_or_create("shard", [shard_id]).call("compute", value)
        return await b.step(f"call-shard-{shard_id}", call)
    return branch


@scatter_gather.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        batch = await loop.queue.next_batch("wait-scatter", timeout=30)
        if not batch:
            return
        value = batch[0].body.input

        gathered = await loop.join("gather", {shard_id: call_shard(shard_id, value) for shard_id in SHARDS})

        def aggregate(s: StepContext) -> None:
            s.state.last_sum = sum(gathered.values())
            s.state.last_parts = gathered

        await loop.step("aggregate", aggregate)

    await ctx.loop("scatter-gather-loop", iteration)


@scatter_gather.action
def get_state(c: ActionContext) -> GatherState:
    return c.state


registry = setup(scatter_gather, shard)
