"""Actors for the dev-stack and Lambda telemetry tests: the DESIGN counter, one whose wake-ups fail (its on_wake
hook raises: an error that names its actor), and one whose step fails and is retried later."""

from __future__ import annotations

from pydantic import BaseModel

from dormant import HookContext, StepContext, WorkflowContext, actor, queue, setup
from examples.counter import counter


class Poke(BaseModel):
    n: int = 0


broken = actor("broken", queues={"poke": queue(Poke)})


@broken.on_wake
def refuse(c: HookContext) -> None:
    raise RuntimeError("the broken actor always fails to wake")


@broken.workflow
async def run_broken(ctx: object) -> None:
    raise AssertionError("never reached: on_wake fails first")


flaky = actor("flaky", queues={"poke": queue(Poke)})


@flaky.workflow
async def run_flaky(ctx: WorkflowContext) -> None:
    await ctx.queue.next("wait-poke")

    def fail(s: StepContext) -> None:
        raise ConnectionError("the service behind this step is down")

    await ctx.step("call-service", fail, max_retries=5, retry_backoff_base=30)


registry = setup(counter, broken, flaky)
