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
