"""The actor benchmarks/large_values.py measures: 20 MB of state, in 200 parts of 100 KB or as one value."""

from __future__ import annotations

import hashlib

from pydantic import BaseModel

from dormant import StepContext, WorkflowContext, actor, queue, setup

PART = 100_000
PARTS = 200


class Big(BaseModel):
    parts: list[str] = []
    blob: str = ""
    reads: int = 0


class Command(BaseModel):
    op: str  # "fill-parts", "fill-blob", "touch", "touch-blob", "peek", "produce"
    index: int = 0
    size: int = 0


def content(seed: str, size: int) -> str:
    """`size` characters that do not repeat across seeds (content-addressed objects must differ)."""
    unit = hashlib.sha256(seed.encode()).hexdigest()
    return (unit * (size // len(unit) + 1))[:size]


big = actor("large-bench", state=Big, queues={"do": queue(Command)})


@big.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("take")
        command = message.body

        def apply(s: StepContext) -> None:
            if command.op == "fill-parts":
                s.state.parts = [content(f"p{i}", PART) for i in range(PARTS)]
            elif command.op == "fill-blob":
                s.state.blob = content("blob", PART * PARTS)
            elif command.op == "touch":
                s.state.parts[command.index] = content(f"t{command.index}-{command.size}", PART)
            elif command.op == "touch-blob":
                s.state.blob = content(f"blob-{command.index}", PART * PARTS)
            elif command.op == "peek":
                _ = len(s.state.parts) + len(s.state.blob)  # reads the state, changes nothing

        if command.op == "produce":
            await loop.step("produce", lambda s: content(f"r{command.index}", command.size))
        else:
            await loop.step(command.op, apply)

    await ctx.loop("commands", iteration)


registry = setup(big)
