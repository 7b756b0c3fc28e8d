"""Actors for the tracing and timeline tests (tests/integration/test_tracing.py, tests/e2e/test_dev_tracing.py,
tests/ui/test_timeline.py).

- `traced`: takes a message, runs a step that fails on its first attempt and succeeds on its second, sleeps 2 s (more
  than INLINE_WAIT: the actor suspends and a timer wakes it) and runs another step (issue 31's scenario);
- `plain`: takes a message and runs a step;
- `lanes`: a 3-branch join of steps, a retried step and a 2 s sleep, then a last step (the timeline's lanes).
"""

from __future__ import annotations

from pydantic import BaseModel

from dormant import StepContext, WorkflowContext, actor, queue, setup


class Go(BaseModel):
    order: str = "o-1"


class Done(BaseModel):
    shipped: bool = False


traced = actor("traced", state=Done, queues={"go": queue(Go)})


def flaky(s: StepContext) -> str:
    if s.attempt == 1:
        raise RuntimeError("the payment provider timed out")
    return "charged"


@traced.workflow
async def run_traced(ctx: WorkflowContext) -> None:
    await ctx.queue.next("order")
    await ctx.step("charge", flaky, max_retries=3, retry_backoff_base=0.05)
    await ctx.sleep("cool-off", 2)

    def ship(s: StepContext) -> None:
        s.state.shipped = True

    await ctx.step("ship", ship)


lanes = actor("lanes", state=Done, queues={"go": queue(Go)})


@lanes.workflow
async def run_lanes(ctx: WorkflowContext) -> None:
    await ctx.queue.next("order")

    def branch(name: str, pause: float) -> object:
        async def body(b: WorkflowContext) -> str:
            async def work(s: StepContext) -> str:
                import asyncio

                await asyncio.sleep(pause)  # each branch takes its own time: the lanes' bars differ
                return name

            return await b.step(f"{name}-work", work)

        return body

    await ctx.join("fan-out", {"a": branch("a", 0.05), "b": branch("b", 0.15), "c": branch("c", 0.1)})
    await ctx.step("charge", flaky, max_retries=3, retry_backoff_base=0.05)
    await ctx.sleep("cool-off", 2)

    def ship(s: StepContext) -> None:
        s.state.shipped = True

    await ctx.step("ship", ship)


plain = actor("plain", state=Done, queues={"go": queue(Go)})


@plain.workflow
async def run_plain(ctx: WorkflowContext) -> None:
    await ctx.queue.next("order")

    def ship(s: StepContext) -> None:
        s.state.shipped = True

    await ctx.step("ship", ship)


registry = setup(traced, lanes, plain)
