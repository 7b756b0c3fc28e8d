"""Actors at the storage limits (tests/integration/test_limits.py, tests/e2e/test_dev_limits.py): a queue loop
recording message sizes, state grown by steps, a step result too big to store, and a run of many entries."""

from __future__ import annotations

from pydantic import BaseModel

from dormant import StepContext, WorkflowContext, actor, queue, setup
from dormant.workflow.errors import StepExhaustedError


class Blob(BaseModel):
    data: str


class Kept(BaseModel):
    sizes: list[int] = []
    notes: list[str] = []
    errors: list[str] = []


class Grow(BaseModel):
    kb: int


# A queue loop that records each message's size (not the body: the message is what is measured).
inbox = actor("limits-inbox", state=Kept, queues={"put": queue(Blob)})


@inbox.workflow
async def run_inbox(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("take")

        def record(s: StepContext) -> None:
            s.state.sizes.append(len(message.body.data))

        await loop.step("record", record)

    await ctx.loop("inbox-loop", iteration)


# State grown by steps; a step that makes it too big to store fails, and the workflow catches it.
grower = actor("limits-grower", state=Kept, queues={"grow": queue(Grow)})


@grower.workflow
async def run_grower(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("take")

        def append(s: StepContext) -> None:
            s.state.notes.append("x" * (message.body.kb * 1000))

        try:
            await loop.step("append", append, max_retries=1, retry_backoff_base=0.01)
        except StepExhaustedError as error:
            failure = error.error_type

            async def remember(s: StepContext) -> None:
                s.state.errors.append(failure)

            await loop.step("remember", remember)

    await ctx.loop("grow-loop", iteration)


# A step result that cannot be stored: not caught, so the workflow fails with it.
result_actor = actor("limits-result", state=Kept)


@result_actor.workflow
async def run_result(ctx: WorkflowContext) -> None:
    await ctx.step("huge", lambda s: "r" * 1_000_000, max_retries=0)


# Many entries in one commit, no step to blame: the actor fails with the error, resumable after a fix.
SLEEPS = 6000
sleeper = actor("limits-sleeper", state=Kept)


@sleeper.workflow
async def run_sleeper(ctx: WorkflowContext) -> None:
    for index in range(SLEEPS):
        await ctx.sleep(f"nap-{index}", 0)


fixed_sleeper = actor("limits-sleeper", state=Kept)


@fixed_sleeper.workflow
async def run_fixed_sleeper(ctx: WorkflowContext) -> None:
    for index in range(SLEEPS):
        await ctx.removed(f"nap-{index}", "sleep")  # nothing was recorded: these retire nothing
    await ctx.step("done", lambda s: "ok")


registry = setup(inbox, grower, result_actor, sleeper)
fixed_registry = setup(inbox, grower, result_actor, fixed_sleeper)
