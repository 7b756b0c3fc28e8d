"""Actors for the boundary tests (issue 9): each one is a case of the issue.

- `notes`: a typed action (`add_note(note: str)`), an action that breaks the state (`append_raw(value)`),
  a queue whose workflow step appends the body to a `list[str]` (a wrong-typed body corrupts the state
  unless the state is validated before the commit) and a body with a string field (`{"note": ...}`).
- `finisher`: its workflow completes after one message (sends after that are refused).
- `breaker`: its workflow fails on its first message (sends after that are held for an operator).
- `deep`: a queue that takes any JSON (the JSON-safety rules, not a schema, are what refuse a body).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue
from examples.counter import counter

__all__ = ["breaker", "counter", "deep", "finisher", "notes"]  # served by tests.api.apps.registry


class NotesState(BaseModel):
    notes: list[str] = []


class Note(BaseModel):
    note: str


notes = actor("notes", state=NotesState, queues={"raw": queue(Any), "note": queue(Note)})


@notes.workflow
async def run_notes(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-note")

        def append(s: StepContext) -> None:
            body = message.body
            s.state.notes.append(body.note if isinstance(body, Note) else body)

        await loop.step("append", append, max_retries=1, retry_backoff_base=0.5)

    await ctx.loop("notes-loop", iteration)


@notes.action
def add_note(c: ActionContext, note: str) -> int:
    c.state.notes.append(note)
    return len(c.state.notes)


@notes.action
def append_raw(c: ActionContext, value: Any) -> int:
    """Appends whatever it is given: a non-string breaks the state, and must commit nothing."""
    c.state.notes.append(value)
    return len(c.state.notes)


@notes.action
def get_notes(c: ActionContext) -> NotesState:
    return c.state


class Count(BaseModel):
    seen: int = 0


finisher = actor("finisher", state=Count, queues={"go": queue(int)})


@finisher.workflow
async def run_finisher(ctx: WorkflowContext) -> int:
    message = await ctx.queue.next("wait-go")
    return int(message.body)


breaker = actor("breaker", state=Count, queues={"go": queue(int)})


@breaker.workflow
async def run_breaker(ctx: WorkflowContext) -> None:
    await ctx.queue.next("wait-go")

    def fail(s: StepContext) -> None:
        raise RuntimeError("the breaker breaks")

    await ctx.step("fail", fail, max_retries=0)
    await ctx.queue.next("never")


deep = actor("deep", state=Count, queues={"any": queue(Any)})


@deep.workflow
async def run_deep(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        await loop.queue.next("wait-any")

        def count(s: StepContext) -> None:
            s.state.seen += 1

        await loop.step("count", count)

    await ctx.loop("deep-loop", iteration)

