"""sleep / sleep_until: absolute deadlines that survive replay; bad instants; early and stale wake-ups."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dormant import StepContext, WorkflowContext, WorkflowState, actor, queue, setup
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item, start


async def test_the_deadline_is_fixed_when_first_reached_and_survives_early_wakeups() -> None:
    a = actor("sleeper", state=Counter, queues={"poke": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        await ctx.sleep("nap", 100)
        return await ctx.step("woke", lambda s: s.now())

    async with TestEnv(setup(a)) as env:
        t0 = env.now()
        handle = await start(env, "sleeper")
        assert (await handle.status()).waiting_for.deadline == t0 + 100
        await env.advance(30)
        await handle.send("poke", {"n": 1})  # an early wake-up replays the sleep: same deadline
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow is WorkflowState.SLEEPING and status.waiting_for.deadline == t0 + 100
        await env.advance(69)
        assert (await handle.status()).workflow is WorkflowState.SLEEPING
        await env.advance(1)
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED
        assert status.output == t0 + 100


async def test_sleep_until_takes_aware_datetimes_epochs_and_timedeltas() -> None:
    a = actor("until", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        start_at = await ctx.step("start", lambda s: s.now())
        await ctx.sleep_until("aware", datetime.fromtimestamp(start_at + 10, tz=UTC))
        after_aware = await ctx.step("t1", lambda s: s.now())
        await ctx.sleep_until("epoch", start_at + 25)
        after_epoch = await ctx.step("t2", lambda s: s.now())
        await ctx.sleep("delta", timedelta(minutes=1))
        after_delta = await ctx.step("t3", lambda s: s.now())
        await ctx.sleep_until("past", start_at)  # already due: no suspension
        return [after_aware - start_at, after_epoch - start_at, after_delta - start_at]

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "until")
        await env.advance(3600)
        assert (await handle.status()).output == [10, 25, 85]
        sleeps = {e.name: e.deadline for e in await handle.history() if e.kind.value == "sleep"}
        t0 = sleeps["aware"] - 10  # type: ignore[operator]
        assert sleeps == {"aware": t0 + 10, "epoch": t0 + 25, "delta": t0 + 85, "past": t0}


async def test_a_naive_datetime_is_rejected() -> None:
    a = actor("naive", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.sleep_until("when", datetime(2030, 1, 1))  # naive: the point of the test

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "naive")
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and "aware datetime" in status.error
        assert [e.name for e in await handle.history()] == []


async def test_stale_and_early_timers_change_nothing() -> None:
    a = actor("stale", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        await ctx.sleep("first", 10)

        def note(s: StepContext) -> None:
            s.state.log.append("after first")

        await ctx.step("note", note)
        message = await ctx.queue.next("wait")
        return message.body.n

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "stale")
        commits = len(env.store.commit_log)
        await env.transport.wake(handle.ref, at=env.now() + 5)  # early timer
        await env.advance(5)
        assert len(env.store.commit_log) == commits  # replayed, suspended again, committed nothing
        await env.advance(5)
        assert (await handle.state()).log == ["after first"]
        commits = len(env.store.commit_log)
        await env.transport.wake(handle.ref, at=env.now() + 1)  # stale: the sleep is over
        await env.advance(10)
        assert len(env.store.commit_log) == commits
        assert (await handle.state()).log == ["after first"]
        await handle.send("go", {"n": 3})
        await env.run_until_idle()
        assert (await handle.status()).output == 3
