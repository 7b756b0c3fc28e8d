"""Request/response (using queue): the caller needs an answer from queued processing. The workflow
receives with `completable=True`, handles the request in a step and answers with `message.complete(...)`;
the caller's `send(..., wait=True)` returns it. Answers are stored by message id, so a caller that
re-sends the same id (after a crash, or to another API instance) gets the same answer, computed once.
"""

from __future__ import annotations

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup


class Request(BaseModel):
    value: int


class Doubled(BaseModel):
    doubled: int


class RequestState(BaseModel):
    handled: int = 0


doubler = actor("request-response", state=RequestState,
                queues={"requests": queue(Request, response=Doubled)})


@doubler.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-request", completable=True)

        def handle_request(s: StepContext) -> int:
            s.state.handled += 1
            return message.body.value * 2

        doubled = await loop.step("handle-request", handle_request)
        assert message.complete is not None  # always set on a completable receive
        await message.complete({"doubled": doubled})

    await ctx.loop("request-loop", iteration)


@doubler.action
def get_state(c: ActionContext) -> RequestState:
    return c.state


registry = setup(doubler)
