"""An actor whose every message's step broadcasts one event, with actions and an authorization hook (tests of realtime
connections and actions over them, docs/realtime.md): the dev user `mallory` may do nothing."""

from __future__ import annotations

from pydantic import BaseModel

from dormant import AccessRequest, ActionContext, StepContext, WorkflowContext, actor, event, queue
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


@notes.action
def add(c: ActionContext, n: int) -> int:
    c.state.count += n
    return c.state.count


@notes.action
def repeat(c: ActionContext, text: str, times: int) -> str:
    return text * times


@notes.action
def who(c: ActionContext) -> list[str]:
    """The caller the action runs as: its kind and id."""
    return [] if c.caller is None else [c.caller.kind, c.caller.id]


@notes.authorize
def may(request: AccessRequest) -> bool:
    return request.caller.id != "mallory"


registry = Registry([notes])
