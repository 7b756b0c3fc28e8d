"""Request/response over queue (async RPC): a responder actor answers completable `requests`
messages from its workflow loop. A caller actor's step sends to it with `wait=True` and records
the response, so actors talk through durable queues rather than direct calls. The deterministic
message id of a re-run step makes the resend a duplicate, answered once."""

from __future__ import annotations

from pydantic import BaseModel

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup

RESPONSE_TIMEOUT = 10.0


class Request(BaseModel):
    value: int


class Doubled(BaseModel):
    doubled: int


class ResponderState(BaseModel):
    handled: int = 0


responder = actor("responder", state=ResponderState, queues={"requests": queue(Request, response=Doubled)})


@responder.workflow
async def serve(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-request", completable=True)

        def handle(s: StepContext) -> int:
            s.state.handled += 1
            return message.body.value * 2

        doubled = await loop.step("handle-request", handle)
        assert message.complete is not None  # always set for completable receives
        await message.complete(Doubled(doubled=doubled))

    await ctx.loop("request-response-loop", iteration)


@responder.action(name="get_state")
def get_responder_state(c: ActionContext) -> ResponderState:
    return c.state


class CallerState(BaseModel):
    answers: list[int] = []


class Job(BaseModel):
    value: int


caller = actor("caller", state=CallerState, queues={"jobs": queue(Job)})


@caller.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        job: Job = (await loop.queue.next("wait-job")).body

        async def ask(s: StepContext) -> int:
            reply = await s.client().get_or_create("responder", ["main"]).send(
                "requests", Request(value=job.value), wait=True, timeout=RESPONSE_TIMEOUT)
            if reply.status != "completed":
                # Retried: the retry re-sends the same message id, so it waits for the same answer.
                raise TimeoutError(f"responder did not answer within {RESPONSE_TIMEOUT} s")
            doubled: int = reply.response["doubled"]
            s.state.answers.append(doubled)
            return doubled

        await loop.step("ask-responder", ask)

    await ctx.loop("caller-loop", iteration)


@caller.action
def get_state(c: ActionContext) -> CallerState:
    return c.state


registry = setup(caller, responder)
