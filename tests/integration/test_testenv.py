"""The test envs as a test author meets them, on both: TestEnv (memory) and AwsTestEnv (the moto server's
DynamoDB and SQS, the poller, the worker). Waiting sends follow the virtual clock and end as soon as no answer
can come; run_until_idle waits for a send started in a task; advance moves the clock while a step runs beside
a timer (docs/testing.md)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from dormant import NonRetryableError, StepContext, WorkflowContext, WorkflowState, actor, queue, setup
from dormant.actor import Registry
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.aws_env import AwsTestEnv

DAY = 24 * 3600.0
GUARD = 20.0  # real seconds: an await that would hang without the fix fails instead

Env = Callable[..., Any]


class Ask(BaseModel):
    n: int
    think: float = 0.0  # seconds the workflow sleeps (durably) before answering
    fail: bool = False


class Answer(BaseModel):
    doubled: int


class Note(BaseModel):
    text: str


class Log(BaseModel):
    seen: list[str] = []


def answerer() -> Registry:
    """"answerer" answers each request after sleeping `think` seconds (durably); "noter" receives notes
    without completable=True: it answers nothing."""
    a = actor("answerer", state=Log, queues={"requests": queue(Ask, response=Answer)})

    @a.workflow
    async def serve(ctx: WorkflowContext) -> None:
        async def iteration(loop: WorkflowContext) -> None:
            message = await loop.queue.next("take-request", completable=True)
            request = message.body
            if request.think:
                await loop.sleep("think", request.think)

            def work(s: StepContext) -> int:
                if request.fail:
                    raise NonRetryableError("the request asked to fail")
                return int(request.n * 2)

            doubled = await loop.step("work", work, max_retries=0)
            assert message.complete is not None
            await message.complete(Answer(doubled=doubled))

        await ctx.loop("serve", iteration)

    n = actor("noter", state=Log, queues={"notes": queue(Note)})

    @n.workflow
    async def take_notes(ctx: WorkflowContext) -> None:
        async def iteration(loop: WorkflowContext) -> None:
            note = await loop.queue.next("take-note")
            await loop.step("keep", lambda s: s.state.seen.append(note.body.text))

        await ctx.loop("notes", iteration)

    return setup(a, n)


@pytest.fixture(params=["memory", "aws"])
def make_env(request: pytest.FixtureRequest) -> Env:
    if request.param == "memory":
        return TestEnv
    settings = Settings(endpoint_url=request.getfixturevalue("moto_server"))
    return functools.partial(AwsTestEnv, settings=settings)


async def test_a_waiting_send_ends_at_its_deadline_on_the_virtual_clock(make_env: Env) -> None:
    async with make_env(answerer()) as env:
        handle = env.client.get_or_create("answerer", ["k"])
        started = time.monotonic()
        waiter = asyncio.create_task(handle.send("requests", {"n": 1, "think": 100}, wait=True, timeout=60))
        await env.advance(59)
        assert not waiter.done()  # 59 virtual seconds: not yet
        await env.advance(2)  # (before: a 60 s wait counted real seconds, and advance(61) did not end it)
        result = await asyncio.wait_for(waiter, GUARD)
        assert result.status == "timedOut" and result.workflow is None
        # The answer comes at 100 s: waiting on the same id again gets it at once.
        await env.advance(40)
        again = await asyncio.wait_for(handle.send("requests", {"n": 1, "think": 100}, wait=True, timeout=60,
                                                   message_id=result.id), GUARD)
        assert (again.status, again.response) == ("completed", {"doubled": 2})
        assert time.monotonic() - started < GUARD


async def test_a_long_wait_ends_at_its_moment_within_one_advance(make_env: Env) -> None:
    """advance() stops at a waiting send's deadline as at a timer: the answer at 2 days, after a 1-day
    deadline, is too late for it, even though one advance covers both."""
    async with make_env(answerer()) as env:
        handle = env.client.get_or_create("answerer", ["k"])
        late = asyncio.create_task(handle.send("requests", {"n": 2, "think": 2 * DAY}, wait=True, timeout=DAY))
        await env.run_until_idle()
        await env.advance(3 * DAY)
        assert (await asyncio.wait_for(late, GUARD)).status == "timedOut"

        in_time = asyncio.create_task(handle.send("requests", {"n": 3, "think": 2 * DAY}, wait=True,
                                                  timeout=3 * DAY))
        await env.advance(2 * DAY)
        result = await asyncio.wait_for(in_time, GUARD)
        assert (result.status, result.response) == ("completed", {"doubled": 6})


async def test_a_wait_on_a_message_received_without_an_answer_ends_at_once(make_env: Env) -> None:
    async with make_env(answerer()) as env:
        handle = env.client.get_or_create("noter", ["k"])
        await handle.status()
        await env.run_until_idle()
        # Awaited directly, with nothing moving the clock: it ends as soon as the note is received.
        result = await asyncio.wait_for(handle.send("notes", {"text": "hello"}, wait=True, timeout=3 * DAY), GUARD)
        assert (result.status, result.response, result.workflow) == ("received", None, None)
        await env.run_until_idle()
        assert (await handle.state()).seen == ["hello"]


async def test_a_wait_ends_when_the_actor_fails_after_taking_the_message(make_env: Env) -> None:
    async with make_env(answerer()) as env:
        handle = env.client.get_or_create("answerer", ["k"])
        result = await asyncio.wait_for(handle.send("requests", {"n": 1, "fail": True}, wait=True, timeout=DAY),
                                        GUARD)
        assert (result.status, result.workflow) == ("received", WorkflowState.FAILED)
        # A later send is held, and says so at once too.
        held = await asyncio.wait_for(handle.send("requests", {"n": 2}, wait=True, timeout=DAY), GUARD)
        assert (held.status, held.workflow) == ("queued", WorkflowState.FAILED)


async def test_a_wait_on_a_pending_message_ends_when_the_actor_fails(make_env: Env) -> None:
    async with make_env(answerer()) as env:
        handle = env.client.get_or_create("answerer", ["k"])
        slow = asyncio.create_task(handle.send("requests", {"n": 1, "think": 60, "fail": True}, wait=True,
                                               timeout=DAY))
        await env.run_until_idle()  # the first request is taken; its think-sleep holds the loop
        behind = asyncio.create_task(handle.send("requests", {"n": 2}, wait=True, timeout=DAY))
        await env.run_until_idle()
        assert not behind.done()  # pending in the inbox, behind the first
        await env.advance(60)  # the first one's step fails: the actor is failed
        first, second = await asyncio.wait_for(asyncio.gather(slow, behind), GUARD)
        assert (first.status, first.workflow) == ("received", WorkflowState.FAILED)
        assert (second.status, second.workflow) == ("queued", WorkflowState.FAILED)  # runs after a resume


async def test_run_until_idle_waits_for_a_send_started_just_before(make_env: Env) -> None:
    async with make_env(answerer()) as env:
        handle = env.client.get_or_create("noter", ["k"])
        sends = [asyncio.create_task(handle.send("notes", {"text": f"n{i}"})) for i in range(3)]
        await env.run_until_idle()  # (before: returned at once, the sends had not started)
        assert all(task.done() for task in sends)
        assert sorted((await handle.state()).seen) == ["n0", "n1", "n2"]


class Bid(BaseModel):
    amount: int


def racer(release: asyncio.Event, log: list[str]) -> Registry:
    a = actor("racer", state=Log, queues={"go": queue(Bid)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> str:
        await ctx.queue.next("wait-go")

        async def slow(branch: WorkflowContext) -> str:
            async def call(s: StepContext) -> str:
                log.append("step started")
                try:
                    await release.wait()  # a call that answers only when the test lets it
                except asyncio.CancelledError:
                    log.append("step cancelled")
                    raise
                return "step"
            return str(await branch.step("call", call, max_retries=0))

        async def timer(branch: WorkflowContext) -> str:
            await branch.sleep("limit", 20)  # within the wake-up's budget (30 s): it can win in process
            return "timer"

        outcome = await ctx.race("first", {"slow": slow, "timer": timer})
        return f"{outcome.winner}:{outcome.value}"

    return setup(a)


async def test_advance_moves_the_clock_while_a_step_runs_beside_a_timer(make_env: Env) -> None:
    release, log = asyncio.Event(), []
    async with make_env(racer(release, log)) as env:
        handle = env.client.get_or_create("racer", ["k"])
        await handle.send("go", {"amount": 1})
        # (before: advance waited for the step first, which waits for the test: a hang)
        await asyncio.wait_for(env.advance(10), GUARD)
        assert log == ["step started"]  # 10 s: the step still runs, the timer waits
        await asyncio.wait_for(env.advance(10), GUARD)
        await asyncio.wait_for(env.run_until_idle(), GUARD)
        status = await handle.status()
        assert (status.workflow, status.output) == (WorkflowState.COMPLETED, "timer:timer")
        assert log == ["step started", "step cancelled"]


def asks_a_person() -> Registry:
    a = actor("asker", state=Log, queues={"ask": queue(Answer, response=Answer), "reply": queue(Answer)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        request = await ctx.queue.next("request", names=["ask"], completable=True)
        reply = await ctx.queue.next("reply", names=["reply"], timeout=3600)
        assert request.complete is not None
        await request.complete({"doubled": reply.body.doubled})

    return setup(a)


async def test_a_waiting_send_nothing_can_answer_raises_instead_of_hanging(make_env: Env) -> None:
    async with make_env(asks_a_person(), patience=0.5) as env:
        handle = env.client.get_or_create("asker", ["k"])
        with pytest.raises(TimeoutError) as stuck:  # awaited directly: the test cannot send the reply meanwhile
            await asyncio.wait_for(handle.send("ask", {"doubled": 1}, wait=True, timeout=7200), GUARD)
        text = str(stuck.value)
        assert "waiting for reply, until 3600 s from now on the virtual clock" in text
        assert "asyncio.create_task" in text and "env.advance(seconds)" in text
        # The message stays stored and open: the same wait, done as the error says, is answered.
        request_id = next(e.messages[0].id for e in await handle.history() if e.name == "request")
        waiting = asyncio.create_task(handle.send("ask", {"doubled": 1}, wait=True, timeout=7200,
                                                  message_id=request_id))
        await handle.send("reply", {"doubled": 9})
        assert (await asyncio.wait_for(waiting, GUARD)).response == {"doubled": 9}


async def test_a_wait_ends_when_a_deploy_makes_the_actor_diverge(make_env: Env) -> None:
    async with make_env(answerer()) as env:
        handle = env.client.get_or_create("answerer", ["k"])
        assert (await handle.send("requests", {"n": 1}, wait=True, timeout=60)).status == "completed"

    renamed = actor("answerer", state=Log, queues={"requests": queue(Ask, response=Answer)})

    @renamed.workflow
    async def serve_v2(ctx: WorkflowContext) -> None:
        async def iteration(loop: WorkflowContext) -> None:
            await loop.queue.next("take-request", completable=True)

        await ctx.loop("serve-v2", iteration)  # history has loop "serve": the deploy diverges

    async with make_env(setup(renamed), store=env.store) as deployed:
        handle = deployed.client.get_or_create("answerer", ["k"])
        result = await asyncio.wait_for(handle.send("requests", {"n": 2}, wait=True, timeout=DAY), GUARD)
        assert (result.status, result.workflow) == ("queued", WorkflowState.DIVERGED)


def one_note() -> Registry:
    a = actor("one-note", state=Log, queues={"notes": queue(Note)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> str:
        note = await ctx.queue.next("take-note")  # as examples/approval_gate.py takes its decision
        await ctx.step("keep", lambda s: s.state.seen.append(note.body.text))
        return "done"

    return setup(a)


async def test_a_message_taken_by_a_workflow_that_then_completes_is_received(make_env: Env) -> None:
    async with make_env(one_note()) as env:
        handle = env.client.get_or_create("one-note", ["k"])
        result = await asyncio.wait_for(handle.send("notes", {"text": "last"}, wait=True, timeout=DAY), GUARD)
        assert (result.status, result.workflow) == ("received", None)  # processed: nothing went wrong with it
        assert (await handle.status()).workflow is WorkflowState.COMPLETED
