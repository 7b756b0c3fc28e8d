"""In-process waits: short deadlines and waits beside a running step resolve in the running wake-up, within
its time budget; everything else suspends. Races against a running step are won at the winner's time.

Tests on the system clock drive single wake-ups (`wake_actor`) over the memory store, with short real
delays; tests on TestEnv's virtual clock move it by hand while a step is in flight."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from dormant import QueueTimeoutError, StepContext, WorkflowContext, WorkflowState, actor, queue, setup
from dormant.actor import Registry
from dormant.memory.store import MemoryEventStore
from dormant.memory.transport import MemoryTransport
from dormant.ports import ActorRef
from dormant.runtime.clocks import SystemClock
from dormant.runtime.service import ActorService
from dormant.runtime.waits import COMMIT_RESERVE, INLINE_WAIT
from dormant.runtime.wake import WakeReport, wake_actor
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item, start


class RealTime:
    """One actor on the memory store and the system clock; each `wake()` is one wake-up, run to its end."""

    def __init__(self, registry: Registry, name: str) -> None:
        self.store = MemoryEventStore()
        self.transport = MemoryTransport()
        self.service = ActorService(registry, self.store, self.transport, SystemClock())
        self.ref = ActorRef(name=name, key=("k",))

    async def create(self) -> None:
        await self.service.ensure_created(self.ref)

    async def wake(self, budget: float | None = None) -> WakeReport:
        return await wake_actor(self.service, self.ref, budget=budget)

    async def status(self) -> Any:
        return await self.service.status(self.ref)


def sleeper(seconds: float) -> Registry:
    a = actor("sleeper", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> str:
        await ctx.step("before", lambda s: s.state.log.append("before"))
        await ctx.sleep("nap", seconds)
        await ctx.step("after", lambda s: s.state.log.append("after"))
        return "done"

    return setup(a)


async def test_a_short_sleep_resolves_in_the_running_wakeup() -> None:
    rt = RealTime(sleeper(0.05), "sleeper")
    await rt.create()
    began = time.monotonic()
    report = await rt.wake()
    assert time.monotonic() - began >= 0.05
    assert report.outcome == "completed" and report.next_wake is None  # no timer, no second wake-up
    nap = next(e for e in await rt.service.history(rt.ref) if e.location == "nap")
    assert nap.status.value == "completed"


async def test_a_sleep_longer_than_the_inline_limit_suspends() -> None:
    rt = RealTime(sleeper(INLINE_WAIT + 60), "sleeper")
    await rt.create()
    began = time.monotonic()
    report = await rt.wake()
    assert time.monotonic() - began < 30  # not the 61 s sleep (generous: the machine may be loaded)
    assert report.outcome == "sleeping" and report.next_wake is not None


async def test_a_short_sleep_beyond_the_budget_suspends() -> None:
    rt = RealTime(sleeper(0.3), "sleeper")
    await rt.create()
    report = await rt.wake(budget=COMMIT_RESERVE + 0.1)  # 0.1 s left for waiting: less than the sleep
    assert report.outcome == "sleeping"
    assert (await rt.status()).waiting_for.deadline is not None


def timer_vs_slow_step(*, timer: float, step_takes: float, log: list[str]) -> Registry:
    a = actor("racer", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def slow(b: WorkflowContext) -> str:
            async def work(s: StepContext) -> str:
                log.append("step started")
                try:
                    await asyncio.sleep(step_takes)
                except asyncio.CancelledError:
                    log.append("step cancelled")
                    raise
                log.append("step finished")
                return "slow"

            return str(await b.step("work", work))

        async def clock(b: WorkflowContext) -> str:
            await b.sleep("deadline", timer)
            return "timer"

        outcome = await ctx.race("work-or-timer", {"slow": slow, "timer": clock})
        return [outcome.winner, outcome.value]

    return setup(a)


async def test_a_race_timer_beats_a_slower_running_step_at_its_time() -> None:
    log: list[str] = []
    rt = RealTime(timer_vs_slow_step(timer=0.05, step_takes=60.0, log=log), "racer")
    await rt.create()
    began = time.monotonic()
    report = await rt.wake()
    assert time.monotonic() - began < 30  # the step's 60 s were not waited for (generous: a loaded machine)
    assert report.outcome == "completed"
    assert (await rt.status()).output == ["timer", "timer"]
    assert log == ["step started", "step cancelled"]
    history = {e.location: e for e in await rt.service.history(rt.ref)}
    race = history["work-or-timer"]
    assert race.winner == "timer" and race.branches["slow"].status.value == "cancelled"
    assert history["work-or-timer/slow/work"].status.value == "cancelled"


async def test_a_race_timer_beyond_the_inline_limit_waits_as_long_as_the_step_runs() -> None:
    log: list[str] = []
    # The timer (1.3 s) is longer than INLINE_WAIT but a step runs beside it: it waits in process.
    rt = RealTime(timer_vs_slow_step(timer=INLINE_WAIT + 0.3, step_takes=30.0, log=log), "racer")
    await rt.create()
    report = await rt.wake()
    assert report.outcome == "completed"
    assert (await rt.status()).output == ["timer", "timer"]
    assert log == ["step started", "step cancelled"]


async def test_a_fast_step_beats_the_timer_and_the_timer_branch_is_cancelled() -> None:
    log: list[str] = []
    rt = RealTime(timer_vs_slow_step(timer=0.5, step_takes=0.01, log=log), "racer")
    await rt.create()
    report = await rt.wake()
    assert report.outcome == "completed"
    assert (await rt.status()).output == ["slow", "slow"]
    race = next(e for e in await rt.service.history(rt.ref) if e.location == "work-or-timer")
    assert race.branches["timer"].status.value == "cancelled"


def short_receive(timeout: float) -> Registry:
    a = actor("receiver", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        await ctx.step("ready", lambda s: s.state.log.append("ready"))
        try:
            message = await ctx.queue.next("wait-go", timeout=timeout)
        except QueueTimeoutError:
            return "timed out"
        return message.body.n

    return setup(a)


async def test_a_message_sent_during_a_short_queue_wait_is_received_in_the_same_wakeup() -> None:
    rt = RealTime(short_receive(0.5), "receiver")
    await rt.create()
    waiting = asyncio.Event()  # the wake-up waits in process for a message
    wait_inbox = rt.store.wait_inbox

    async def noticed(*args: Any, **kwargs: Any) -> Any:
        waiting.set()
        return await wait_inbox(*args, **kwargs)

    rt.store.wait_inbox = noticed  # type: ignore[method-assign]

    async def send_soon() -> None:
        await waiting.wait()  # then at once: inside the 0.5 s wait however slow the machine is
        await rt.service.send(rt.ref, "go", {"n": 7})

    sender = asyncio.ensure_future(send_soon())
    report = await rt.wake()
    await sender
    assert report.outcome == "completed" and (await rt.status()).output == 7


async def test_a_short_queue_timeout_expires_in_the_same_wakeup() -> None:
    rt = RealTime(short_receive(0.05), "receiver")
    await rt.create()
    report = await rt.wake()
    assert report.outcome == "completed" and (await rt.status()).output == "timed out"
    wait = next(e for e in await rt.service.history(rt.ref) if e.location == "wait-go")
    assert wait.timed_out


def queue_vs_step(log: list[str], release: asyncio.Event) -> Registry:
    a = actor("interruptible", state=Counter, queues={"cancel": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def work(b: WorkflowContext) -> str:
            async def long_job(s: StepContext) -> str:
                log.append("job started")
                try:
                    await release.wait()
                except asyncio.CancelledError:
                    log.append("job cancelled")
                    raise
                return "finished"

            return str(await b.step("job", long_job))

        async def interrupt(b: WorkflowContext) -> int:
            return int((await b.queue.next("wait-cancel")).body.n)

        outcome = await ctx.race("job-or-cancel", {"work": work, "cancel": interrupt})
        return [outcome.winner, outcome.value]

    return setup(a)


async def test_a_message_wins_a_race_against_a_running_step_when_it_arrives() -> None:
    log: list[str] = []
    release = asyncio.Event()  # never set: the job would run forever
    async with TestEnv(queue_vs_step(log, release)) as env:
        handle = env.client.get_or_create("interruptible", ["k"])
        await handle.status()
        while log != ["job started"]:
            await asyncio.sleep(0)
        await handle.send("cancel", {"n": 3})
        await env.run_until_idle()
        assert (await handle.status()).output == ["cancel", 3]
        assert log == ["job started", "job cancelled"]


async def test_a_queue_branch_beside_a_step_suspends_once_the_step_is_done() -> None:
    log: list[str] = []
    release = asyncio.Event()
    release.set()  # the job finishes at once: it wins, the queue branch never waits on
    async with TestEnv(queue_vs_step(log, release)) as env:
        handle = await start(env, "interruptible")
        assert (await handle.status()).output == ["work", "finished"]


async def test_under_a_clock_that_stands_still_a_short_wait_suspends() -> None:
    async with TestEnv(sleeper(0.05)) as env:
        handle = await start(env, "sleeper")
        status = await handle.status()
        assert status.workflow is WorkflowState.SLEEPING
        assert status.waiting_for.deadline == pytest.approx(env.now() + 0.05)
        await env.advance(0.05)
        assert (await handle.state()).log == ["before", "after"]


async def test_a_virtual_clock_moved_while_a_step_runs_ends_the_race_timer() -> None:
    log: list[str] = []
    async with TestEnv(timer_vs_slow_step(timer=5.0, step_takes=30.0, log=log)) as env:
        handle = env.client.get_or_create("racer", ["k"])
        await handle.status()
        while log != ["step started"]:
            await asyncio.sleep(0)
        env.clock.advance(4.9)
        await asyncio.sleep(0.01)
        assert log == ["step started"]  # not yet
        env.clock.advance(0.1)
        await env.run_until_idle()
        assert (await handle.status()).output == ["timer", "timer"]
        assert log == ["step started", "step cancelled"]


async def test_a_race_timer_beyond_the_budget_does_not_wait_in_process() -> None:
    log: list[str] = []
    rt = RealTime(timer_vs_slow_step(timer=0.2, step_takes=0.6, log=log), "racer")
    await rt.create()
    report = await rt.wake(budget=COMMIT_RESERVE + 0.1)  # 0.1 s of budget left for waiting: the timer suspends
    assert report.outcome == "completed"
    assert (await rt.status()).output == ["slow", "slow"]  # so the step, still running, finished first
    assert log == ["step started", "step finished"]
