"""TestEnv's own promises, beyond what both envs share (tests/integration/test_testenv.py): a wait that cannot end
without the test says so instead of hanging (a waiting send too: there), and a call started in a task is waited
for like a send."""

from __future__ import annotations

import asyncio

import pytest

from dormant import ActionContext, StepContext, WorkflowContext, WorkflowState, actor, queue, setup
from dormant.actor import Registry
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item

GUARD = 10.0


def blocked_step(release: asyncio.Event) -> Registry:
    a = actor("blocked", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> int:
        message = await ctx.queue.next("wait-go")

        async def call(s: StepContext) -> int:
            await release.wait()  # an external call the test answers
            return int(message.body.n)

        return int(await ctx.step("call", call))

    return setup(a)


@pytest.mark.parametrize("wait", ["run_until_idle", "advance"])
async def test_a_step_that_waits_for_the_test_raises_instead_of_hanging(wait: str) -> None:
    release = asyncio.Event()
    async with TestEnv(blocked_step(release), patience=0.3) as env:
        handle = env.client.get_or_create("blocked", ["k"])
        await handle.send("go", {"n": 7})
        waiting = env.run_until_idle() if wait == "run_until_idle" else env.advance(60)
        with pytest.raises(TimeoutError) as stuck:
            await asyncio.wait_for(waiting, GUARD)
        text = str(stuck.value)
        assert "blocked/k" in text and "A step is still running" in text and "docs/testing.md" in text
        release.set()  # the test answers: the same env carries on
        await asyncio.wait_for(env.run_until_idle(), GUARD)
        assert (await handle.status()).output == 7


async def test_a_slow_step_is_waited_for_as_long_as_it_makes_progress() -> None:
    release = asyncio.Event()
    async with TestEnv(blocked_step(release), patience=0.3) as env:
        handle = env.client.get_or_create("blocked", ["k"])
        await handle.send("go", {"n": 3})
        asyncio.get_running_loop().call_later(0.1, release.set)  # real work that ends by itself
        await asyncio.wait_for(env.run_until_idle(), GUARD)
        assert (await handle.status()).workflow is WorkflowState.COMPLETED


def bumper() -> Registry:
    a = actor("bumper", state=Counter, queues={"bump": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def iteration(loop: WorkflowContext) -> None:
            message = await loop.queue.next("wait-bump")
            await loop.step("apply", lambda s: setattr(s.state, "value", s.state.value + message.body.n))

        await ctx.loop("bumps", iteration)

    @a.action
    async def bump_later(c: ActionContext, n: int) -> None:
        await c.client().get_or_create("bumper", ["k"]).send("bump", {"n": n})

    return setup(a)


async def test_run_until_idle_waits_for_a_call_started_just_before() -> None:
    async with TestEnv(bumper()) as env:
        handle = env.client.get_or_create("bumper", ["k"])
        call = asyncio.create_task(handle.call("bump_later", 5))
        await env.run_until_idle()
        assert call.done()
        assert (await handle.state()).value == 5


async def test_a_wake_up_that_waits_for_nothing_is_settled_without_a_wait_for_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On the memory store a loop wake-up runs to its end in one turn of the event loop: run_until_idle looks again
    after that turn, with no asyncio.wait (a timer and done callbacks per wake-up); one that is still running after
    it is waited for (the slow step above)."""
    waits = 0
    real_wait = asyncio.wait

    async def counted(*args: object, **kwargs: object) -> object:
        nonlocal waits
        waits += 1
        return await real_wait(*args, **kwargs)  # type: ignore[call-overload]

    async with TestEnv(bumper()) as env:
        handle = env.client.get_or_create("bumper", ["k"])
        await handle.send("bump", {"n": 1})
        await env.run_until_idle()
        monkeypatch.setattr(asyncio, "wait", counted)
        for n in range(2, 5):
            await handle.send("bump", {"n": n})
            await env.run_until_idle()
            assert (await handle.state()).value == sum(range(1, n + 1))
        assert waits == 0


def test_the_carried_size_is_the_messages_json_in_utf_8_bytes() -> None:
    """check_carried_size measures the serializer's bytes (model_dump_json's text, encoded): non-ASCII counts as its
    UTF-8 bytes, and a message just over the limit is refused."""
    from dormant.errors import ItemTooLargeError
    from dormant.ports import MAX_CARRIED_BYTES, Creation, InboxMessage
    from dormant.runtime.send_rules import check_carried_size

    message = InboxMessage(id="m", queue="q", body={"text": "é" * 10}, created_at=1.0)
    creation = Creation(input={"name": "ü"})
    exact = len(message.model_dump_json().encode()) + len(creation.model_dump_json().encode())
    pad = MAX_CARRIED_BYTES - exact
    at_limit = message.model_copy(update={"body": {"text": "é" * 10 + "x" * pad}})
    check_carried_size(at_limit, creation)  # exactly at the limit: taken
    with pytest.raises(ItemTooLargeError):
        check_carried_size(message.model_copy(update={"body": {"text": "é" * 10 + "x" * pad + "é"}}), creation)


async def test_a_wake_up_without_a_message_carries_nothing() -> None:
    from dormant.memory.transport import MemoryTransport
    from dormant.ports import ActorRef, InboxMessage

    transport = MemoryTransport()
    ref = ActorRef(name="a", key=("k",))
    await transport.wake(ref)
    assert transport.pop_due(0.0) == [ref] and transport.take_carried(ref) is None
    first = InboxMessage(id="m1", queue="q", body=1, created_at=0.0)
    second = InboxMessage(id="m2", queue="q", body=2, created_at=0.0)
    for message in (first, second, first):
        await transport.wake(ref, message=message)
    assert transport.pop_due(0.0) == [ref]
    carried = transport.take_carried(ref)
    assert carried is not None and carried.messages == [first, second] and transport.take_carried(ref) is None
