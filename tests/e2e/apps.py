"""Actors for the dev-stack end-to-end tests: the DESIGN counter, and one whose wake-ups fail (its on_wake
hook raises), to see an error line that names its actor."""

from __future__ import annotations

from pydantic import BaseModel

from dormant import HookContext, actor, queue, setup
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


registry = setup(counter, broken)
