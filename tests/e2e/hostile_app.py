"""An actor for the terminal-safety tests: it keeps every note it is sent in its state (so a test can tell
which actor a key reached), fails, with the note as its error message, on a note that starts "fail:", and has
an action that raises with the text it is given."""

from __future__ import annotations

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup


class Notes(BaseModel):
    texts: list[str] = []


class Note(BaseModel):
    text: str


ledger = actor("ledger", state=Notes, queues={"note": queue(Note)})


@ledger.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-note")

        def record(s: StepContext) -> str:
            if message.body.text.startswith("fail:"):
                raise ValueError(message.body.text)
            s.state.texts.append(message.body.text)
            return message.body.text

        await loop.step("record", record, max_retries=0)

    await ctx.loop("notes", iteration)


@ledger.action
def refuse(c: ActionContext, text: str) -> None:
    raise ValueError(text)


registry = setup(ledger)
