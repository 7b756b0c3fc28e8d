"""Request/response over queue (async RPC): actors talk through durable queues, with explicit completion.

A responder's workflow loop answers completable `requests` messages: `message.complete(...)` answers a
client's `send(wait=True)`, and a request that names a `reply_to` actor also gets its answer as a message
on that actor's `replies` queue. A caller actor sends its request in a step (a re-run step re-sends the
same message id, a duplicate the responder ignores) and then waits for the reply durably, with
`queue.next(timeout=...)`: nothing is held in memory, so a crash or a redeploy while it waits loses
nothing. A request that times out is sent again once (a late reply to the first one is as good); then
the caller gives up and records it. Replies to requests it gave up on are dropped when they arrive."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel

from dormant import ActionContext, QueueTimeoutError, StepContext, WorkflowContext, actor, queue, setup

RESPONSE_TIMEOUT = 10.0  # seconds the caller waits for each attempt's reply
MAX_ATTEMPTS = 2


async def _double(value: int) -> int:
    return value * 2


@dataclass
class Services:
    """The work behind the responder (injected; tests make it slow or failing)."""

    double: Callable[[int], Awaitable[int]] = _double


services = Services()


class ReplyTo(BaseModel):
    actor: str
    key: list[str]
    request_id: str


class Request(BaseModel):
    value: int
    reply_to: ReplyTo | None = None


class Doubled(BaseModel):
    doubled: int


class Reply(BaseModel):
    request_id: str
    doubled: int


class ResponderState(BaseModel):
    handled: int = 0


responder = actor("responder", state=ResponderState, queues={"requests": queue(Request, response=Doubled)})


@responder.workflow
async def serve(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-request", completable=True)
        request: Request = message.body

        async def handle(s: StepContext) -> int:
            doubled = await services.double(request.value)
            s.state.handled += 1
            return doubled

        doubled = await loop.step("handle-request", handle)
        reply_to = request.reply_to
        if reply_to is not None:
            async def reply(s: StepContext) -> None:
                await s.client().get_or_create(reply_to.actor, reply_to.key).send(
                    "replies", Reply(request_id=reply_to.request_id, doubled=doubled))

            await loop.step("send-reply", reply)
        assert message.complete is not None  # always set for completable receives
        await message.complete(Doubled(doubled=doubled))

    await ctx.loop("request-response-loop", iteration)


@responder.action(name="get_state")
def get_responder_state(c: ActionContext) -> ResponderState:
    return c.state


class CallerState(BaseModel):
    answers: list[int] = []
    timed_out: list[int] = []  # values whose requests were never answered in time


class Job(BaseModel):
    value: int


caller = actor("caller", state=CallerState, queues={"jobs": queue(Job), "replies": queue(Reply)})


async def await_reply(loop: WorkflowContext, attempt: int, request_id: str) -> int | None:
    """The reply to `request_id`, or None when none came within RESPONSE_TIMEOUT."""
    for n in itertools.count():
        try:
            message = await loop.queue.next(f"wait-reply-{attempt}.{n}", names=["replies"],
                                            timeout=RESPONSE_TIMEOUT)
        except QueueTimeoutError:
            return None
        reply: Reply = message.body
        if reply.request_id == request_id:
            return reply.doubled
        # A late reply to a request this caller gave up on: dropped (its receipt is recorded).
    return None  # unreachable: the loop returns


@caller.workflow
async def run(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("wait-job", names=["jobs"])
        job: Job = message.body
        request_id = message.id  # every attempt for this job carries it; its reply names it

        for attempt in range(1, MAX_ATTEMPTS + 1):
            async def ask(s: StepContext) -> None:
                reply_to = ReplyTo(actor=s.name, key=list(s.key), request_id=request_id)
                await s.client().get_or_create("responder", ["main"]).send(
                    "requests", Request(value=job.value, reply_to=reply_to))

            await loop.step(f"send-request-{attempt}", ask)
            doubled = await await_reply(loop, attempt, request_id)
            if doubled is not None:
                def record(s: StepContext, doubled: int = doubled) -> None:
                    s.state.answers.append(doubled)

                await loop.step("record-answer", record)
                return

        def give_up(s: StepContext) -> None:
            s.state.timed_out.append(job.value)

        await loop.step("give-up", give_up)

    await ctx.loop("caller-loop", iteration)


@caller.action
def get_state(c: ActionContext) -> CallerState:
    return c.state


registry = setup(caller, responder)
