"""An actor whose every message's step broadcasts one event (tests of realtime connections, docs/realtime.md)."""

from __future__ import annotations

from pydantic import BaseModel

from dormant import StepContext, WorkflowContext, actor, event, queue
from dormant.actor import Registry


class Note(BaseModel):
    text: str


class Notes(BaseModel):
    count: int = 0


notes = actor("notes", state=Notes, queues={"notes": queue(Note)}, events={"noted": event(Note)})


@notes.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-note")

        def note(s: StepContext) -> None:
            s.state.count += 1
            s.broadcast("noted", message.body)

        await loop.step("note", note)

    await ctx.loop("notes-loop", iteration)


registry = Registry([notes])
