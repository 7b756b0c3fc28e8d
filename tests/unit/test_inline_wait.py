"""The in-process wait limit (dormant.runtime.waits, DORMANT_INLINE_WAIT): a wait with nothing beside it is waited
for in the running wake-up up to the limit, and suspends beyond it; by default the limit is the wait that costs
what a suspension does at the function's memory (docs/performance.md "The in-process wait").

On TestEnv's backends (the memory store and transport) with a clock that jumps: time passes by itself (a realtime
clock, so the limit applies) but a sleep on it ends at once, at its moment: nothing sleeps for real."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from dormant import WorkflowContext, actor, setup
from dormant.actor import Registry
from dormant.memory.store import MemoryEventStore
from dormant.memory.transport import MemoryTransport
from dormant.ports import ActorRef
from dormant.runtime.service import ActorService
from dormant.runtime.waits import (
    DEFAULT_MEMORY_MB,
    INLINE_WAIT,
    SUSPENSION_GB_SECONDS,
    break_even_wait,
    inline_wait_for,
)
from dormant.runtime.wake import WakeReport, wake_actor
from dormant.settings import Settings
from tests.unit.support import Counter


class JumpingClock:
    """A realtime clock whose sleeps end at once, the clock moved to their moment (each sleep is recorded)."""

    realtime = True

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.moment = start
        self.slept: list[float] = []

    def now(self) -> float:
        return self.moment

    async def sleep_until(self, moment: float) -> None:
        if moment > self.moment:
            self.slept.append(moment - self.moment)
            self.moment = moment
        await asyncio.sleep(0)


def napper(seconds: float) -> Registry:
    a = actor("napper", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> str:
        await ctx.sleep("nap", seconds)
        await ctx.step("after", lambda s: s.state.log.append("after"))
        return "done"

    return setup(a)


async def wake_once(seconds: float, **service: float) -> tuple[WakeReport, JumpingClock]:
    clock = JumpingClock()
    actors = ActorService(napper(seconds), MemoryEventStore(), MemoryTransport(), clock, **service)
    ref = ActorRef(name="napper", key=("k",))
    await actors.create_actor(ref, wake=False)
    return await wake_actor(actors, ref), clock


@pytest.mark.parametrize(("limit", "nap", "in_process"), [
    (None, INLINE_WAIT - 0.01, True),  # the default limit (ActorService's, without the setting)
    (None, INLINE_WAIT + 0.01, False),
    (5.0, 4.9, True),  # a user who wants short sleeps on time raises it
    (5.0, 5.1, False),
    (0.0, 0.01, False),  # and 0 suspends every wait
])
async def test_a_wait_under_the_limit_is_waited_in_process_and_one_over_it_suspends(
        limit: float | None, nap: float, in_process: bool) -> None:
    report, clock = await wake_once(nap, **({} if limit is None else {"inline_wait": limit}))
    if in_process:
        assert report.outcome == "completed" and report.next_wake is None
        assert clock.slept == [pytest.approx(nap)]
    else:
        assert report.outcome == "sleeping" and report.next_wake == pytest.approx(1_000_000.0 + nap)
        assert clock.slept == []


def test_the_default_limit_is_the_break_even_wait_at_the_functions_memory() -> None:
    assert INLINE_WAIT == break_even_wait(DEFAULT_MEMORY_MB) == 0.52
    # Lambda bills GB-seconds: twice the memory, half the wait that costs a suspension
    assert break_even_wait(1024) == pytest.approx(SUSPENSION_GB_SECONDS) == 0.26
    assert break_even_wait(128) == pytest.approx(4 * INLINE_WAIT, abs=0.01)
    assert inline_wait_for(None, None) == INLINE_WAIT
    assert inline_wait_for(None, 2048) == 0.13
    assert inline_wait_for(2.0, 2048) == 2.0 and inline_wait_for(0.0, None) == 0.0  # the setting wins


def test_the_settings_read_the_limit_and_lambdas_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024")
    settings = Settings()
    assert (settings.inline_wait, settings.function_memory_mb) == (None, 1024)
    assert inline_wait_for(settings.inline_wait, settings.function_memory_mb) == 0.26
    monkeypatch.setenv("DORMANT_INLINE_WAIT", "1.5")
    assert Settings().inline_wait == 1.5
    for wrong in ("-1", "61", "soon"):
        monkeypatch.setenv("DORMANT_INLINE_WAIT", wrong)
        with pytest.raises(ValidationError, match="inline_wait"):
            Settings()
