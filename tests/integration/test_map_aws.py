"""ctx.map on the AWS stack (DynamoDB Local, moto's SQS, the poller, the worker): the bound holds across wake-ups
that SQS timers start, the result replays, and a map too big for DynamoDB's live-history item fails the actor
visibly, never a wake-up on every receive (docs/semantics.md, "map")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from dormant import StepContext, WorkflowContext, WorkflowState, actor, queue, setup
from dormant.settings import Settings
from tests.aws_env import AwsTestEnv
from tests.unit.support import Counter, Item

in_flight: set[int] = set()
peak: list[int] = [0]

stepper = actor("map-stepper", state=Counter, queues={"go": queue(Item)})


@stepper.workflow
async def run_stepper(ctx: WorkflowContext) -> Any:
    async def work(item_ctx: WorkflowContext, item: int) -> int:
        def begin(s: StepContext) -> None:
            in_flight.add(item)
            peak[0] = max(peak[0], len(in_flight))

        await item_ctx.step("begin", begin)
        await item_ctx.sleep("work", 2)  # the actor suspends: an SQS timer wakes it
        await item_ctx.step("end", lambda s: in_flight.discard(item))
        return item * 2

    result = await ctx.map("steps", list(range(7)), work, max_concurrency=3)
    await ctx.queue.next("wait")  # the next wake-up replays the finished map
    return result.values


big = actor("map-big", state=Counter)


@big.workflow
async def run_big(ctx: WorkflowContext) -> Any:
    async def work(item_ctx: WorkflowContext, item: int) -> dict[str, Any]:
        return dict(await item_ctx.step("charge", lambda s: {"order": f"order-{item:05d}", "charged": True}))

    result = await ctx.map("charges", list(range(2_000)), work, max_concurrency=10)
    return len(result.values)


registry = setup(stepper, big)


@pytest.fixture
async def env(aws_endpoints: dict[str, str]) -> AsyncIterator[AwsTestEnv]:
    async with AwsTestEnv(registry, settings=Settings(**aws_endpoints), offload=False) as created:
        yield created


async def test_the_bound_holds_across_wake_ups_on_aws(env: AwsTestEnv) -> None:
    in_flight.clear()
    peak[0] = 0
    handle = env.client.get_or_create("map-stepper", ["s"])
    await handle.status()
    await env.run_until_idle()
    assert len(in_flight) == 3
    for _ in range(4):
        await env.advance(2)
    await handle.send("go", {"n": 0})
    await env.run_until_idle()
    status = await handle.status()
    assert (status.workflow, status.output) == (WorkflowState.COMPLETED, [i * 2 for i in range(7)]), status.error
    assert peak[0] == 3 and not in_flight


async def test_a_map_too_big_for_the_live_history_fails_the_actor_visibly(env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("map-big", ["b"])
    await handle.status()
    await env.run_until_idle()
    status = await handle.status()
    # Every item is an item entry and a step entry in the live history, which must fit one DynamoDB item (400,000
    # bytes, less the 2,048 kept for a failure): 869 items of this size do (about 430 bytes each). The commit past it
    # is refused, and the actor fails with the error (a record that always fits in the room kept for it).
    assert status.workflow is WorkflowState.FAILED, status
    assert status.error is not None and status.error.startswith("ItemTooLargeError")
    history = await handle.history()
    finished = sum(1 for e in history if e.kind.value == "map_item" and e.status.value == "completed")
    assert 700 < finished < 1_200, finished
    assert not env.failures  # no wake-up failed on every receive
