"""Queues: order, filters, batches, timeouts, early messages, duplicates, completable messages, validation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from dormant import (
    InvalidMessageError,
    QueueTimeoutError,
    StepContext,
    UnknownQueueError,
    WorkflowContext,
    WorkflowState,
    actor,
    queue,
    setup,
)
from dormant.ports import InboxMessage
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item, start, store_dump


class Answer(BaseModel):
    doubled: int


def logging_worker(name: str, **queues: Any) -> Any:
    """Logs every message it receives: [queue, n]."""
    a = actor(name, state=Counter, queues=queues or {"work": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def body(loop: WorkflowContext) -> None:
            message = await loop.queue.next("wait")

            def record(s: StepContext) -> None:
                s.state.log.append([message.name, message.body.n])

            await loop.step("record", record)

        await ctx.loop("main", body)

    return a


async def test_messages_are_received_in_send_order() -> None:
    a = logging_worker("fifo", a=queue(Item), b=queue(Item))
    async with TestEnv(setup(a)) as env:
        handle = env.client.get_or_create("fifo", ["k"])
        for i, name in enumerate(["a", "b", "a", "b", "b", "a"]):
            await handle.send(name, {"n": i})
        await env.run_until_idle()
        assert (await handle.state()).log == [["a", 0], ["b", 1], ["a", 2], ["b", 3], ["b", 4], ["a", 5]]
        assert env.store.inbox_ids(handle.ref) == []


async def test_names_filter_and_batches() -> None:
    a = actor("filter", state=Counter, queues={"low": queue(Item), "high": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        high = await ctx.queue.next("high-first", names=["high"])
        batch = await ctx.queue.next_batch("three-low", count=3, names=["low"])
        rest = await ctx.queue.next_batch("rest", count=10)
        return {"high": high.body.n, "batch": [m.body.n for m in batch], "rest": [m.body.n for m in rest]}

    async with TestEnv(setup(a)) as env:
        handle = env.client.get_or_create("filter", ["k"])
        for n in range(5):
            await handle.send("low", {"n": n})
        await env.run_until_idle()
        assert (await handle.status()).waiting_for.queues == ["high"]
        await handle.send("high", {"n": 100})
        await env.run_until_idle()
        # next_batch returns what is there (1..count): it does not wait for `count` messages.
        assert (await handle.status()).output == {"high": 100, "batch": [0, 1, 2], "rest": [3, 4]}


async def test_timeouts_give_an_empty_batch_or_a_catchable_queue_timeout_error() -> None:
    a = actor("timeouts", state=Counter, queues={"work": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        batch = await ctx.queue.next_batch("optional", count=5, timeout=10)
        try:
            await ctx.queue.next("required", timeout=20)
        except QueueTimeoutError as error:
            return [len(batch), type(error).__name__, "required" in str(error)]
        return "unreachable"

    async with TestEnv(setup(a)) as env:
        t0 = env.now()
        handle = await start(env, "timeouts")
        status = await handle.status()
        assert status.waiting_for.queues == ["work"] and status.waiting_for.deadline == t0 + 10
        await env.advance(9.5)
        assert (await handle.status()).workflow is WorkflowState.SLEEPING
        await env.advance(0.5)
        assert (await handle.status()).waiting_for.deadline == t0 + 10 + 20
        await env.advance(20)
        assert (await handle.status()).output == [0, "QueueTimeoutError", True]


async def test_a_message_before_the_timeout_wins_and_the_stale_timer_is_harmless() -> None:
    a = actor("timeout-msg", state=Counter, queues={"work": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        message = await ctx.queue.next("required", timeout=20)
        return message.body.n

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "timeout-msg")
        await env.advance(5)
        await handle.send("work", {"n": 4})
        await env.run_until_idle()
        commits = len(env.store.commit_log)
        await env.advance(100)  # the 20 s timer still fires: nothing changes
        assert len(env.store.commit_log) == commits
        assert (await handle.status()).output == 4


async def test_messages_sent_before_the_workflow_waits_are_kept() -> None:
    a = actor("early", state=Counter, queues={"work": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        await ctx.sleep("warm-up", 60)
        batch = await ctx.queue.next_batch("all", count=10)
        return [m.body.n for m in batch]

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "early")
        await handle.send("work", {"n": 1})
        await handle.send("work", {"n": 2})
        await env.run_until_idle()
        assert env.store.inbox_ids(handle.ref) != []  # stored, not consumed, while it sleeps
        await env.advance(60)
        assert (await handle.status()).output == [1, 2]


async def test_messages_sent_before_the_actor_exists_are_kept() -> None:
    a = logging_worker("unborn")
    async with TestEnv(setup(a)) as env:
        owner = env.client.get_or_create("unborn", ["k"], input={"who": "owner"})
        other = env.client.get_or_create("unborn", ["k"])  # another handle, first to speak
        await other.send("work", {"n": 1})
        # Straight into the store before the actor record exists (as a remote sender could).
        ref = env.service.ref("unborn", ["k2"])
        await env.store.enqueue(ref, InboxMessage(id="m-early", queue="work", body={"n": 7}, created_at=env.now()))
        assert not await env.store.exists(ref)
        await owner.send("work", {"n": 2})
        later = env.client.get_or_create("unborn", ["k2"])
        await later.status()
        await env.run_until_idle()
        assert (await owner.state()).log == [["work", 1], ["work", 2]]
        assert (await later.state()).log == [["work", 7]]


async def test_duplicate_message_ids_are_ignored() -> None:
    a = logging_worker("dupes")
    async with TestEnv(setup(a)) as env:
        handle = env.client.get_or_create("dupes", ["k"])
        first = await handle.send("work", {"n": 1}, message_id="m-1")
        again = await handle.send("work", {"n": 1}, message_id="m-1")
        assert first.id == again.id == "m-1"
        await env.run_until_idle()
        await handle.send("work", {"n": 1}, message_id="m-1")  # also after it was consumed
        await handle.send("work", {"n": 2}, message_id="m-2")
        await env.run_until_idle()
        assert (await handle.state()).log == [["work", 1], ["work", 2]]


def rpc_actor(name: str, workflow: Any) -> Any:
    a = actor(name, state=Counter, queues={"ask": queue(Item, response=Answer)})
    a.workflow(workflow)
    return a


async def test_completable_message_answers_send_with_wait() -> None:
    async def run(ctx: WorkflowContext) -> None:
        async def body(loop: WorkflowContext) -> None:
            message = await loop.queue.next("ask", completable=True)
            assert message.complete is not None
            doubled = await loop.step("double", lambda s: message.body.n * 2)
            await message.complete({"doubled": doubled})

        await ctx.loop("serve", body)

    a = rpc_actor("rpc", run)
    async with TestEnv(setup(a)) as env:
        handle = env.client.get_or_create("rpc", ["k"])
        result = await handle.send("ask", {"n": 21}, wait=True, timeout=5)
        assert result.status == "completed" and result.response == {"doubled": 42}
        again = await handle.send("ask", {"n": 5}, wait=True, timeout=5)
        assert again.response == {"doubled": 10}
        assert env.store.responses(handle.ref) == {result.id: {"doubled": 42}, again.id: {"doubled": 10}}


async def test_completing_twice_in_one_run_is_an_error() -> None:
    async def run(ctx: WorkflowContext) -> None:
        message = await ctx.queue.next("ask", completable=True)
        assert message.complete is not None
        await message.complete({"doubled": 1})
        await message.complete({"doubled": 2})

    a = rpc_actor("twice", run)
    async with TestEnv(setup(a)) as env:
        handle = env.client.get_or_create("twice", ["k"])
        result = await handle.send("ask", {"n": 1}, wait=True, timeout=5)
        await env.run_until_idle()  # the answer is committed mid-run: let the run finish
        assert result.response == {"doubled": 1}  # the first answer stands
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and "already completed" in status.error


class Verdict(BaseModel):
    factor: int


def two_step_desk(name: str) -> Any:
    """A request (completable) waits for a verdict on another queue before it is answered: two receives while
    the first message is open, across a suspension."""
    a = actor(name, state=Counter, queues={"ask": queue(Item, response=Answer), "verdict": queue(Verdict)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def body(loop: WorkflowContext) -> None:
            request = await loop.queue.next("request", names=["ask"], completable=True)
            verdict = await loop.queue.next("verdict", names=["verdict"])
            product = await loop.step("apply", lambda s: request.body.n * verdict.body.factor)
            assert request.complete is not None
            await request.complete({"doubled": product})

        await ctx.loop("desk", body)

    return a


async def test_a_completable_message_stays_open_while_the_workflow_receives_another() -> None:
    async with TestEnv(setup(two_step_desk("desk"))) as env:
        handle = env.client.get_or_create("desk", ["k"])
        waiter = asyncio.create_task(handle.send("ask", {"n": 4}, wait=True, timeout=60))
        await env.run_until_idle()
        status = await handle.status()
        assert (status.workflow, status.waiting_for.queues) == (WorkflowState.SLEEPING, ["verdict"])
        assert not waiter.done()
        await handle.send("verdict", {"factor": 3})
        result = await asyncio.wait_for(waiter, 5)
        assert (result.status, result.response) == ("completed", {"doubled": 12})
        assert env.failures == []


async def test_an_open_completable_message_survives_a_redeploy_and_is_answered_once() -> None:
    async with TestEnv(setup(two_step_desk("desk"))) as env:
        handle = env.client.get_or_create("desk", ["k"])
        queued = await handle.send("ask", {"n": 5}, message_id="req-1")
        await env.run_until_idle()  # received, recorded open; the actor waits for the verdict

    async with TestEnv(setup(two_step_desk("desk")), store=env.store) as again:
        handle = again.client.get_or_create("desk", ["k"])
        await handle.send("verdict", {"factor": 2})
        await again.run_until_idle()
        result = await handle.send("ask", {"n": 5}, wait=True, timeout=5, message_id=queued.id)
        assert (result.status, result.response) == ("completed", {"doubled": 10})
        assert again.store.responses(handle.ref) == {"req-1": {"doubled": 10}}
        entry = next(e for e in await handle.history() if e.kind.value == "message" and e.name == "request")
        assert [(m.id, m.completed, m.completable) for m in entry.messages] == [("req-1", True, True)]


async def test_two_open_completable_messages_are_answered_in_any_order() -> None:
    async def run(ctx: WorkflowContext) -> None:
        first = await ctx.queue.next("first", completable=True)
        second = await ctx.queue.next("second", completable=True)
        await ctx.sleep("pause", 10)  # a suspension with both open: replay must restore both
        assert first.complete is not None and second.complete is not None
        await second.complete({"doubled": second.body.n * 2})
        await first.complete({"doubled": first.body.n * 2})

    async with TestEnv(setup(rpc_actor("pair", run))) as env:
        handle = env.client.get_or_create("pair", ["k"])
        waiters = [asyncio.create_task(handle.send("ask", {"n": n}, wait=True, timeout=60)) for n in (1, 2)]
        await env.run_until_idle()
        await env.advance(10)
        results = await asyncio.wait_for(asyncio.gather(*waiters), 5)
        assert [r.response for r in results] == [{"doubled": 2}, {"doubled": 4}]
        assert (await handle.status()).workflow is WorkflowState.COMPLETED


async def test_response_is_validated_against_the_queue_response_model() -> None:
    errors: list[str] = []

    async def run(ctx: WorkflowContext) -> None:
        message = await ctx.queue.next("ask", completable=True)
        assert message.complete is not None
        try:
            await message.complete({"doubled": "not a number"})
        except InvalidMessageError as error:
            errors.append(str(error))
        await message.complete(Answer(doubled=message.body.n * 2))

    a = rpc_actor("validated", run)
    async with TestEnv(setup(a)) as env:
        handle = env.client.get_or_create("validated", ["k"])
        result = await handle.send("ask", {"n": 4}, wait=True, timeout=5)
        await env.run_until_idle()
        assert result.response == {"doubled": 8}
        assert len(errors) == 1 and 'queue "ask" response is invalid' in errors[0]
        assert (await handle.status()).workflow is WorkflowState.COMPLETED


async def test_completion_survives_replay_and_is_not_answered_twice() -> None:
    async def run(ctx: WorkflowContext) -> Any:
        message = await ctx.queue.next("ask", completable=True)
        assert message.complete is not None
        await message.complete({"doubled": message.body.n * 2})
        await ctx.sleep("after", 10)
        # On the replay after the sleep, complete() is a recorded no-op.
        await message.complete({"doubled": -1})
        return "done"

    a = rpc_actor("replayed", run)
    async with TestEnv(setup(a)) as env:
        handle = env.client.get_or_create("replayed", ["k"])
        result = await handle.send("ask", {"n": 3}, wait=True, timeout=5)
        await env.advance(10)
        assert result.response == {"doubled": 6}
        assert env.store.responses(handle.ref) == {result.id: {"doubled": 6}}


BAD_SENDS = pytest.mark.parametrize(("queue_name", "body", "error"), [
    ("nope", {"n": 1}, UnknownQueueError),
    ("work", {"n": "not an int"}, InvalidMessageError),
    ("work", {"m": 1}, InvalidMessageError),
])


@BAD_SENDS
async def test_bad_sends_to_an_existing_actor_are_errors_and_store_nothing(
        queue_name: str, body: Any, error: type[Exception]) -> None:
    a = logging_worker("strict")
    async with TestEnv(setup(a)) as env:
        handle = env.client.get_or_create("strict", ["existing"])
        await handle.send("work", {"n": 1})
        await env.run_until_idle()
        before = store_dump(env.store)
        with pytest.raises(error):
            await handle.send(queue_name, body)
        await env.run_until_idle()
        assert store_dump(env.store) == before
        assert (await handle.state()).log == [["work", 1]]


@BAD_SENDS
async def test_bad_sends_through_the_service_do_not_create_the_actor(
        queue_name: str, body: Any, error: type[Exception]) -> None:
    a = logging_worker("strict")
    async with TestEnv(setup(a)) as env:
        before = store_dump(env.store)
        with pytest.raises(error):
            await env.service.send(env.service.ref("strict", ["fresh"]), queue_name, body)
        assert store_dump(env.store) == before


@BAD_SENDS
async def test_a_bad_first_send_through_a_handle_does_not_create_the_actor(
        queue_name: str, body: Any, error: type[Exception]) -> None:
    a = logging_worker("strict")
    async with TestEnv(setup(a)) as env:
        fresh = env.client.get_or_create("strict", ["fresh"])
        before = store_dump(env.store)
        with pytest.raises(error):
            await fresh.send(queue_name, body)
        assert store_dump(env.store) == before


async def test_queue_wait_on_an_undeclared_queue_fails_the_workflow() -> None:
    a = actor("wrong-wait", state=Counter, queues={"work": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.queue.next("wait", names=["missing"])

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "wrong-wait")
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and "undeclared queue(s) ['missing']" in status.error
