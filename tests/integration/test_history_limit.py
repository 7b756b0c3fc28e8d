"""Issue 26, item 2, through the whole AWS path on AWS's own DynamoDB Local: a workflow whose history grows to the item
limit one step at a time ends `failed` with the error naming the limit (or `completed`), never `running` with a wake
error that fails on every receive, at whatever byte offset the limit is crossed; and it resumes after a fix.

Twenty runs, each with its own entry size and filler, cross the limit at different offsets (at a scaled item limit,
to keep it quick: tests/unit/test_record_room.py covers every offset of the rule itself); one more is the workflow of
the finding, 2,000 steps in one run at the real 400,000-byte limit. Ten more fail with a rollback handler whose
compensation (succeeding or raising) is the commit at the limit."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dormant import WorkflowContext, actor, setup
from dormant.core.limits import ITEM, RECORD_ROOM
from dormant.ports import ActorRef
from dormant.runtime.attention import current_wake_error
from dormant.settings import Settings
from dormant.workflow.history import WorkflowState
from tests.aws_env import AwsTestEnv

RUNS = 20
SCALED_LIMIT = 24_000

stepper = actor("history-stepper")


def noise(size: int) -> str:
    """Text that compresses about as little as base64 does: the snapshots are not made small by zlib."""
    return secrets.token_urlsafe(size)[:size]


@stepper.workflow
async def run_stepper(ctx: WorkflowContext) -> str:
    spec: dict[str, Any] = ctx.input
    if spec["filler"]:
        await ctx.step("filler", lambda s: noise(spec["filler"]), max_retries=0)
    for index in range(spec["steps"]):
        await ctx.step(f"s{index}", lambda s: noise(spec["pad"]), max_retries=0)
    return "done"


fixed_stepper = actor("history-stepper")


@fixed_stepper.workflow
async def run_fixed_stepper(ctx: WorkflowContext) -> str:
    """The fix: the steps are retired (recorded ones are skipped, the rest never run), nothing more is recorded."""
    spec: dict[str, Any] = ctx.input
    await ctx.removed("filler", "step")
    for index in range(spec["steps"]):
        await ctx.removed(f"s{index}", "step")
    return "fixed"


compensated = actor("history-compensated")


@compensated.workflow
async def run_compensated(ctx: WorkflowContext) -> str:
    """A first step with a rollback handler (`undo`: "ok" or "raise"), then steps up to the limit: the workflow
    fails there, and the compensation's own commit is the one at the limit."""
    spec: dict[str, Any] = ctx.input

    def undo(s: Any, output: Any) -> None:
        if spec["undo"] == "raise":
            raise RuntimeError("the compensation fails")

    await ctx.rollback_checkpoint("saga")
    await ctx.step("reserve", lambda s: "booked", rollback=undo)
    await ctx.step("filler", lambda s: noise(spec["filler"]), max_retries=0)
    for index in range(spec["steps"]):
        await ctx.step(f"s{index}", lambda s: noise(spec["pad"]), max_retries=0)
    return "done"


registry = setup(stepper, compensated)
fixed_registry = setup(fixed_stepper, compensated)


@pytest.fixture
async def env(dynamodb_local_server: str, moto_server: str) -> AsyncIterator[AwsTestEnv]:
    """DynamoDB on DynamoDB Local, SQS on moto, no bucket: the history lives in DynamoDB's items alone."""
    settings = Settings(endpoint_url=moto_server, dynamodb_endpoint_url=dynamodb_local_server)
    async with AwsTestEnv(registry, settings=settings, offload=False) as created:
        yield created


async def ended_cleanly(env: AwsTestEnv, ref: ActorRef) -> WorkflowState:
    """The actor ended failed with the item limit named, or completed; no wake error left on it."""
    status = await env.client.get_or_create(ref.name, list(ref.key)).status()
    snapshot = await env.store.load(ref)
    assert snapshot is not None and current_wake_error(snapshot) is None
    assert status.workflow in (WorkflowState.FAILED, WorkflowState.COMPLETED), (ref, status)
    if status.workflow is WorkflowState.FAILED:
        assert status.error is not None and "ItemTooLargeError" in status.error, status.error
        assert f"over the limit ({ITEM.name})" in status.error, status.error
    return status.workflow


async def resume_fixed(env: AwsTestEnv, refs: list[ActorRef]) -> None:
    """A deploy of the fix, then `resume`: every actor completes (nothing more is recorded at the limit)."""
    async with AwsTestEnv(fixed_registry, store=env.store) as fixed:
        for ref in refs:
            handle = fixed.client.get_or_create(ref.name, list(ref.key))
            if (await handle.status()).workflow is WorkflowState.FAILED:
                assert (await handle.resume()).outcome == "retrying"
        await fixed.run_until_idle()
        for ref in refs:
            status = await fixed.client.get_or_create(ref.name, list(ref.key)).status()
            assert status.workflow is WorkflowState.COMPLETED and status.output in ("fixed", "done"), status
        assert not fixed.failures


async def test_histories_grown_to_the_limit_one_step_at_a_time_end_failed_and_resume_after_a_fix(
        env: AwsTestEnv) -> None:
    env.store.inner.item_limit = SCALED_LIMIT  # the store's own check at a smaller limit (the items are real)
    handles = []
    for run in range(RUNS):  # an entry of 160 to 369 bytes, crossing at a different offset each time
        spec = {"filler": SCALED_LIMIT - RECORD_ROOM.maximum - 3_000 + 23 * run, "pad": 50 + 11 * run, "steps": 60}
        handles.append(env.client.get_or_create("history-stepper", [f"run-{run}"], input=spec))
    handles.append(env.client.get_or_create(  # one that ends just short of the limit
        "history-stepper", ["short"], input={"filler": 1_000, "pad": 100, "steps": 10}))
    for handle in handles:
        await handle.status()  # creates it: its wake-up runs the whole workflow
    await env.run_until_idle()  # raises if a wake-up went to the DLQ
    ends = [await ended_cleanly(env, handle.ref) for handle in handles]
    assert ends == [WorkflowState.FAILED] * RUNS + [WorkflowState.COMPLETED]
    assert not env.failures  # no wake-up raised: none failed on a receive
    steps = [len((await env.store.load(handle.ref) or pytest.fail()).history) for handle in handles[:RUNS]]
    assert all(3 <= count <= 30 for count in steps), steps  # each grew one step at a time up to the limit
    # Resumed with the same code, it fails again at once, cleanly.
    again = handles[0]
    assert (await again.resume()).outcome == "retrying"
    await env.run_until_idle()
    assert await ended_cleanly(env, again.ref) is WorkflowState.FAILED and not env.failures
    await resume_fixed(env, [handle.ref for handle in handles])


async def test_the_findings_workflow_of_2000_steps_at_the_real_item_limit(env: AwsTestEnv) -> None:
    assert env.store.item_limit == ITEM.maximum
    handle = env.client.get_or_create("history-stepper", ["finding"], input={"filler": 0, "pad": 120, "steps": 2_000})
    await handle.status()
    await env.run_until_idle()
    assert await ended_cleanly(env, handle.ref) is WorkflowState.FAILED
    snapshot = await env.store.load(handle.ref)
    assert snapshot is not None and 1_000 < len(snapshot.history) < 2_000 and not env.failures
    await resume_fixed(env, [handle.ref])


async def test_a_compensation_at_the_limit_ends_failed_whether_it_succeeds_or_fails(env: AwsTestEnv) -> None:
    env.store.inner.item_limit = SCALED_LIMIT
    handles = [env.client.get_or_create("history-compensated", [f"{undo}-{run}"], input={
        "undo": undo, "filler": SCALED_LIMIT - RECORD_ROOM.maximum - 3_000 + 41 * run, "pad": 60 + 13 * run,
        "steps": 60}) for undo in ("ok", "raise") for run in range(5)]
    for handle in handles:
        await handle.status()
    await env.run_until_idle()
    assert [await ended_cleanly(env, handle.ref) for handle in handles] == [WorkflowState.FAILED] * len(handles)
    assert not env.failures
