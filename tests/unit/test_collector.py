"""The collector policy of a wake-up, and the property it relies on: a step leaves no reference cycles."""

from __future__ import annotations

import gc

from dormant import StepContext, WorkflowContext, actor, setup
from dormant.memory.store import MemoryEventStore
from dormant.memory.transport import MemoryTransport
from dormant.runtime.collector import YOUNG_THRESHOLD, relaxed_collector
from dormant.runtime.service import ActorService
from dormant.runtime.wake import wake_actor
from dormant.testing import VirtualClock
from tests.unit.support import Counter


def test_the_threshold_is_raised_for_the_wakeup_and_restored() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with relaxed_collector():
            assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
            with relaxed_collector():  # a concurrent wake-up changes nothing
                assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(50_000, 10, 10)  # someone's own, higher setting is left alone
        with relaxed_collector():
            assert gc.get_threshold() == (50_000, 10, 10)
        assert gc.get_threshold() == (50_000, 10, 10)
    finally:
        gc.set_threshold(*before)


async def cyclic_garbage_of_a_wakeup(steps: int) -> int:
    """Objects only the collector could free after a wake-up that runs `steps` new steps."""
    a = actor("acyclic", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> int:
        total = 0
        for i in range(steps):
            def step(s: StepContext, i: int = i) -> int:
                if i % 2:
                    s.state.value += 1
                return i

            total += await ctx.step(f"s{i}", step)
        return total

    service = ActorService(setup(a), MemoryEventStore(keep_commit_log=False), MemoryTransport(), VirtualClock())
    ref = service.ref("acyclic", ["k"])
    await service.ensure_created(ref)
    gc.collect()
    gc.disable()
    try:
        report = await wake_actor(service, ref)
        assert report.outcome == "completed"
        return gc.collect()
    finally:
        gc.enable()


async def test_steps_leave_no_reference_cycles_behind() -> None:
    # What a run leaves to the collector is its own bookkeeping (the execution, its live entries), not a
    # cycle per step: about one object per step (an Entry), where each step used to leave ten.
    few, many = await cyclic_garbage_of_a_wakeup(100), await cyclic_garbage_of_a_wakeup(300)
    assert (many - few) / 200 < 1.5, (few, many)
