"""Firing an actor's next timer now (dormant.runtime.timers, `dormant fire-timer` under `dormant dev`): a 24-hour
sleep, a queue wait's timeout, a step's retry, a race's timer branch, a scheduled action. The clock never moves
here: the workflow sees the deadline as reached because the history records the fired time, and a later replay
(a new deploy over the same store, and the offline replay) agrees."""

from __future__ import annotations

from typing import Any

import pytest

from dormant import QueueTimeoutError, StepContext, WorkflowContext, WorkflowState, actor, queue, setup
from dormant.actor import Registry
from dormant.errors import ActorFinishedError, ActorNotFoundError, NoTimerError
from dormant.ports import ActorRef
from dormant.runtime.offline import replay_snapshot
from dormant.runtime.timers import fire_next_timer, pending_timers
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item, start

DAY = 24 * 3600.0


def napper() -> Registry:
    a = actor("napper", state=Counter, queues={"poke": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        await ctx.sleep("day", DAY)
        try:
            message = await ctx.queue.next("answer", timeout=DAY)
            got: Any = message.body.n
        except QueueTimeoutError:
            got = "timed out"

        def note(s: StepContext) -> None:
            s.state.log.append(got)

        await ctx.step("note", note)
        return got

    return setup(a)


async def test_a_day_long_sleep_and_a_queue_timeout_fire_now_and_replays_agree() -> None:
    registry = napper()
    async with TestEnv(registry) as env:
        handle = await start(env, "napper")
        ref = handle.ref
        started = env.now()
        result = await fire_next_timer(env.service, ref)
        assert (result.operation, result.outcome, result.status) == ("fire_timer", "fired", WorkflowState.SLEEPING)
        assert "sleep day" in result.message and "24.0 h early" in result.message
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow is WorkflowState.SLEEPING and status.waiting_for.queues == ["poke"]
        assert status.waiting_for.deadline == started + DAY  # the queue wait's own timeout, from when it began
        second = await fire_next_timer(env.service, ref)
        assert "the timeout of queue wait answer" in second.message
        await env.run_until_idle()
        status = await handle.status()
        assert (status.workflow, status.output) == (WorkflowState.COMPLETED, "timed out")
        assert env.now() == started  # no time passed: the history holds the fired deadlines
        history = {e.location: e for e in await handle.history()}
        assert history["day"].deadline == started and history["answer"].timed_out
        with pytest.raises(ActorFinishedError):
            await fire_next_timer(env.service, ref)
        snapshot = await env.store.load(ref)
        assert snapshot is not None
        assert (await replay_snapshot(registry, snapshot)).outcome == "ok"
    async with TestEnv(registry, store=env.store) as again:  # a deploy of the same code over the same store
        await again.transport.wake(ref)
        await again.run_until_idle()
        assert (await again.client.get_or_create("napper", ["k"]).state()).log == ["timed out"]


async def test_a_retry_fires_now_and_runs_the_step_again() -> None:
    calls: list[int] = []
    a = actor("flaky", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        def flaky(s: StepContext) -> int:
            calls.append(s.attempt)
            if s.attempt == 1:
                raise RuntimeError("not yet")
            return s.attempt

        return await ctx.step("flaky", flaky, retry_backoff_base=1800.0)  # the retry waits an hour

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "flaky")
        assert calls == [1] and (await handle.status()).waiting_for.retry_at is not None
        result = await fire_next_timer(env.service, handle.ref)
        assert "the retry of step flaky" in result.message
        await env.run_until_idle()
        assert calls == [1, 2]
        assert (await handle.status()).output == 2


async def test_a_race_timer_fires_and_wins_while_a_settled_branch_timer_is_ignored() -> None:
    a = actor("racer", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def reply(b: WorkflowContext) -> str:
            await b.queue.next("reply")
            return "reply"

        async def timer(b: WorkflowContext) -> str:
            await b.sleep("deadline", DAY)
            return "timeout"

        first = await ctx.race("wait", {"reply": reply, "timer": timer})
        await ctx.sleep("later", 2 * DAY)
        return first.winner

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "racer")
        assert [t.what for t in pending_timers(await _load(env, handle.ref))] == ["sleep wait/timer/deadline"]
        await fire_next_timer(env.service, handle.ref)
        await env.run_until_idle()
        snapshot = await _load(env, handle.ref)
        race = next(e for e in snapshot.history if e.location == "wait")
        assert race.winner == "timer" and race.status.value == "completed"
        assert [t.what for t in pending_timers(snapshot)] == ["sleep later"]
        await fire_next_timer(env.service, handle.ref)
        await env.run_until_idle()
        assert (await handle.status()).output == "timer"


async def test_a_scheduled_action_runs_now() -> None:
    a = actor("planner", state=Counter, queues={"go": queue(Item)})

    @a.action
    def plan(c: Any) -> None:
        c.state.log.append("planned")

    @a.action
    async def later(c: Any) -> None:
        await c.schedule.after(DAY, "remind", "soon")

    @a.action
    def remind(c: Any, text: str) -> None:
        c.state.log.append(text)

    async with TestEnv(setup(a)) as env:
        handle = env.client.get_or_create("planner", ["k"])
        await handle.call("later")
        await env.run_until_idle()
        result = await fire_next_timer(env.service, handle.ref)
        assert "scheduled action remind" in result.message
        await env.run_until_idle()
        assert (await handle.state()).log == ["soon"]
        assert (await _load(env, handle.ref)).inbox == []
        with pytest.raises(NoTimerError, match="nothing is scheduled"):
            await fire_next_timer(env.service, handle.ref)


async def test_no_timer_a_failed_actor_and_a_missing_one_are_refused_and_change_nothing() -> None:
    a = actor("waiter", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        message = await ctx.queue.next("go")
        if message.body.n < 0:
            raise ValueError("negative")
        await ctx.sleep("nap", DAY)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "waiter")
        before = await _load(env, handle.ref)
        with pytest.raises(NoTimerError, match="waits for a message on go without a timeout"):
            await fire_next_timer(env.service, handle.ref)
        assert (await _load(env, handle.ref)).version == before.version
        await handle.send("go", {"n": -1})
        await env.run_until_idle()
        assert (await handle.status()).workflow is WorkflowState.FAILED
        with pytest.raises(NoTimerError):
            await fire_next_timer(env.service, handle.ref)
        with pytest.raises(ActorNotFoundError):
            await fire_next_timer(env.service, ActorRef(name="waiter", key=("nobody",)))


async def _load(env: TestEnv, ref: ActorRef) -> Any:
    snapshot = await env.store.load(ref)
    assert snapshot is not None
    return snapshot
