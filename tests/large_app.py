"""Actors with values of any size (tests/integration/test_large_values.py, tests/e2e/test_dev_large_values.py):
state grown by 100 KB steps, a step result of a given size, big message bodies, responses and events."""

from __future__ import annotations

import hashlib

from pydantic import BaseModel

from dormant import StepContext, WorkflowContext, actor, event, queue, setup


class Chunk(BaseModel):
    kb: int
    fill: str = "a"


class Notes(BaseModel):
    chunks: list[str] = []
    digests: list[str] = []
    results: list[int] = []


class Echo(BaseModel):
    text: str


class Big(BaseModel):
    size: int


class Reply(BaseModel):
    text: str


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# State that grows: each message appends a chunk of `kb` KB; the state reads back whole.
notebook = actor("large-notebook", state=Notes, queues={"append": queue(Chunk), "echo": queue(Echo),
                                                         "result": queue(Big)},
                 events={"grown": event(Echo)})


@notebook.workflow
async def run_notebook(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("take")
        body = message.body

        if isinstance(body, Chunk):
            def append(s: StepContext) -> None:
                s.state.chunks.append(body.fill * (body.kb * 1000))
            await loop.step("append", append)
        elif isinstance(body, Echo):
            def remember(s: StepContext) -> None:  # the message body as the workflow saw it
                s.state.digests.append(digest(body.text))
                s.broadcast("grown", {"text": body.text})
            await loop.step("remember", remember)
        else:
            size = body.size
            result = await loop.step("produce", lambda s: "r" * size)

            def record(s: StepContext) -> None:
                s.state.results.append(len(result))
            await loop.step("record", record)

    await ctx.loop("notes", iteration)


@notebook.action
def total(c: StepContext) -> int:
    return sum(len(chunk) for chunk in c.state.chunks)


# Request/response with a big answer: a completable message answered with `size` bytes.
answers = actor("large-answers", state=Notes, queues={"ask": queue(Big, response=Reply)})


@answers.workflow
async def run_answers(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("ask", completable=True)
        assert message.complete is not None
        await message.complete({"text": "z" * message.body.size})

    await ctx.loop("answers", iteration)


registry = setup(notebook, answers)
