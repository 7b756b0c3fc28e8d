"""The engine's issue-33 primitives on the AWS stack (DynamoDB Local, moto's SQS, the poller, the worker): a
`try_step` that exhausts its retries across SQS retry timers, and a workflow deadline whose SQS timer wakes a
waiting actor to fail it and roll it back (docs/semantics.md, "try_step and try_", "Workflow deadline")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from dormant import StepContext, WorkflowContext, WorkflowState, WorkflowTimeoutError, actor, queue, setup
from dormant.settings import Settings
from tests.aws_env import AwsTestEnv
from tests.unit.support import Counter, Item

tried = actor("aws-try-step", state=Counter, queues={"go": queue(Item)})


@tried.workflow
async def run_tried(ctx: WorkflowContext) -> Any:
    def charge(s: StepContext) -> None:
        s.state.value += 1  # reverted with each failed attempt; counted in `log` by the next step instead
        raise RuntimeError("gateway down")

    result = await ctx.try_step("charge", charge, max_retries=2, retry_backoff_base=1)
    await ctx.step("note", lambda s: s.state.log.append(result.failure.kind if result.failure else "ok"))
    await ctx.queue.next("wait")  # the next wake-up replays the recorded failure
    assert result.failure is not None
    return [result.ok, result.failure.kind, result.failure.attempts, result.failure.error.message]


timed = actor("aws-deadline", state=Counter, queues={"go": queue(Item)}, workflow_timeout=3600)


@timed.workflow
async def run_timed(ctx: WorkflowContext) -> None:
    await ctx.rollback_checkpoint("start")
    await ctx.step("reserve", lambda s: s.state.log.append("reserved"),
                   rollback=lambda s, _: s.state.log.append("released"))
    await ctx.queue.next("wait")  # nothing comes


registry = setup(tried, timed)


@pytest.fixture
async def env(aws_endpoints: dict[str, str]) -> AsyncIterator[AwsTestEnv]:
    async with AwsTestEnv(registry, settings=Settings(**aws_endpoints), offload=False) as created:
        yield created


async def test_try_step_returns_exhaustion_and_replays_it_on_aws(env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("aws-try-step", ["t"])
    await handle.status()
    await env.run_until_idle()
    for _ in range(2):
        await env.advance(10)  # each retry is an SQS timer
    assert (await handle.state()).log == ["exhausted"]
    await handle.send("go", {"n": 1})
    await env.run_until_idle()
    status = await handle.status()
    assert status.workflow is WorkflowState.COMPLETED, status.error
    assert status.output == [False, "exhausted", 3, "gateway down"]
    assert (await handle.state()).log == ["exhausted"]  # the replay ran neither step again


async def test_the_deadline_timer_fails_and_rolls_back_a_waiting_actor_on_aws(env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("aws-deadline", ["d"])
    await handle.status()
    await env.run_until_idle()
    assert (await handle.status()).workflow is WorkflowState.SLEEPING
    await env.advance(3601)
    status = await handle.status()
    assert status.workflow is WorkflowState.FAILED
    assert status.error is not None and status.error.startswith(WorkflowTimeoutError.__name__)
    assert (await handle.state()).log == ["reserved", "released"]
