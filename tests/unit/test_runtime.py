"""The runtime: conditional commits and retries after lost races, serial re-runs, storage faults."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import pytest

from dormant import ActionContext, StepContext, WorkflowContext, WorkflowState, actor, queue, setup
from dormant.memory.store import MemoryEventStore
from dormant.runtime.wake import MAX_SCHEDULED_PER_WAKE, wake_actor
from dormant.testing import TestEnv
from dormant.workflow.execution import CommitDraft
from tests.unit.support import Counter, Item, reports_for, start

Commit = Callable[[Any, int, CommitDraft], Awaitable[int]]


def counter_actor(name: str, step_calls: list[int] | None = None) -> Any:
    """Adds each message to `value` in a step; `bump` adds 1000 from outside the workflow."""
    a = actor(name, state=Counter, queues={"work": queue(Item)})

    @a.action
    def bump(c: ActionContext) -> None:
        c.state.value += 1000

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def body(loop: WorkflowContext) -> None:
            message = await loop.queue.next("wait")

            async def apply(s: StepContext) -> None:
                if step_calls is not None:
                    step_calls.append(message.body.n)
                await asyncio.sleep(0)  # let another wake-up interleave
                s.state.value += message.body.n
                s.state.log.append(message.body.n)

            await loop.step("apply", apply)

        await ctx.loop("main", body)

    return a


def intercept_commits(store: MemoryEventStore, before: Callable[[CommitDraft], Awaitable[None]]) -> None:
    """Run `before(draft)` ahead of every commit the store receives."""
    original: Commit = store.commit

    async def commit(ref: Any, expected_version: int, draft: CommitDraft) -> int:
        await before(draft)
        return await original(ref, expected_version, draft)

    store.commit = commit  # type: ignore[method-assign]


async def test_an_action_committing_during_a_wakeup_makes_it_reread_and_retry() -> None:
    step_calls: list[int] = []
    a = counter_actor("conflict", step_calls)
    async with TestEnv(setup(a)) as env:
        handle = await start(env, "conflict")
        fired: list[bool] = []

        async def action_first(draft: CommitDraft) -> None:
            if draft.upserts and not fired:  # the wake-up's first commit (its entries), not the action's
                fired.append(True)
                await handle.call("bump")

        intercept_commits(env.store, action_first)
        await handle.send("work", {"n": 7})
        await env.run_until_idle()
        assert fired == [True]
        state = await handle.state()
        assert state.value == 1007  # both the action's and the workflow's changes
        assert state.log == [7]
        assert step_calls == [7, 7]  # the step's uncommitted result was discarded and re-run
        assert reports_for(env, handle)[-1].attempts == 2
        assert env.failures == []


async def test_concurrent_wakeups_of_one_actor_commit_once_each_change() -> None:
    a = counter_actor("twins")
    async with TestEnv(setup(a)) as env:
        handle = await start(env, "twins")
        env.transport.on_wake = None  # drive wake-ups by hand from here
        for n in (1, 2, 3):
            await handle.send("work", {"n": n})
        results = await asyncio.gather(*(wake_actor(env.service, handle.ref) for _ in range(3)))
        assert sum(r.attempts for r in results) > 3  # they did collide
        state = await handle.state()
        assert state.value == 6 and state.log == [1, 2, 3]
        assert env.store.inbox_ids(handle.ref) == []
        loop_entry = next(e for e in await handle.history() if e.location == "main")
        assert loop_entry.iteration == 3


async def test_a_step_failing_while_a_sibling_step_is_in_flight_reruns_the_wakeup_serially() -> None:
    calls: list[str] = []
    a = actor("restart", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def slow(b: WorkflowContext) -> int:
            async def body(s: StepContext) -> int:
                calls.append("slow")
                s.state.value += 1
                for _ in range(5):
                    await asyncio.sleep(0)
                s.state.log.append("slow done")
                return 1

            return int(await b.step("slow", body))

        async def flaky(b: WorkflowContext) -> int:
            def body(s: StepContext) -> int:
                calls.append(f"flaky {s.attempt}")
                s.state.value += 100  # interleaved with "slow": undoing it alone is impossible
                if s.attempt == 1:
                    raise RuntimeError("transient")
                return 2

            return int(await b.step("flaky", body, retry_backoff_base=0.5))

        return await ctx.join("j", {"slow": slow, "flaky": flaky})

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "restart")
        report = reports_for(env, handle)[0]
        assert report.attempts == 2  # the concurrent run was abandoned, the serial one committed
        # The serial run: "slow" to its end, then "flaky" fails alone and its change is reverted.
        assert calls == ["slow", "flaky 1", "slow", "flaky 1"]
        state = await handle.state()
        assert state.value == 1 and state.log == ["slow done"]
        await env.advance(1)
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED
        assert status.output == {"slow": 1, "flaky": 2}
        assert (await handle.state()).value == 101
        assert calls[-1] == "flaky 2"


async def test_a_race_loser_cancelled_while_it_commits_does_not_void_the_wakeup() -> None:
    a = actor("commit-cancel", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def steps(b: WorkflowContext) -> str:
            await b.step("one", lambda s: s.state.log.append("one"))  # commits while "instant" wins
            await b.step("two", lambda s: s.state.log.append("two"))
            return "steps"

        async def instant(b: WorkflowContext) -> str:
            return "instant"

        result = await ctx.race("r", {"steps": steps, "instant": instant})
        return result.winner

    async with TestEnv(setup(a)) as env:
        async def slow_storage(draft: CommitDraft) -> None:
            await asyncio.sleep(0)  # as any real store: the commit yields to the event loop

        intercept_commits(env.store, slow_storage)
        handle = await start(env, "commit-cancel")
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED, status
        assert status.output == "instant"
        assert env.failures == []
        assert (await handle.state()).log == ["one"]  # committed before the loser was cancelled


async def test_more_due_scheduled_actions_than_one_wakeup_runs_are_all_run_in_order() -> None:
    total = MAX_SCHEDULED_PER_WAKE + 30
    a = actor("busy-schedule", state=Counter)

    @a.action
    def tick(c: ActionContext, i: int) -> None:
        c.state.log.append(i)

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def plan(s: StepContext) -> None:
            for i in range(total):
                await s.schedule.after(10, "tick", i)

        await ctx.step("plan", plan)
        await ctx.sleep("rest", 3600)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "busy-schedule")
        await env.advance(10)
        assert (await handle.state()).log == list(range(total))
        assert env.failures == []  # used to fail: every action counted as a lost version race


async def reference_run(registry: Any, name: str) -> tuple[Any, list[Any]]:
    """The fault-free run of `fault_actor`: its state and history outputs."""
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create(name, ["k"])
        await drive(env, handle, lambda: None)
        return await handle.state(), [(e.location, e.output) for e in await handle.history()]


async def drive(env: TestEnv, handle: Any, arm: Callable[[], None]) -> int:
    """Send both messages, call `arm()`, then run every wake-up; returns the storage calls made after `arm`."""
    for n in (1, 2):
        await handle.send("work", {"n": n}, message_id=f"m{n}")
    arm()  # the wake-ups have not run yet: they start in run_until_idle
    calls_before = env.store.calls
    await env.run_until_idle()
    await env.advance(5)
    return env.store.calls - calls_before


def fault_actor(name: str) -> Any:
    a = actor(name, state=Counter, queues={"work": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        batch = await ctx.queue.next_batch("first", count=1)
        await ctx.step("apply-1", lambda s: s.state.log.append(batch[0].body.n))
        await ctx.sleep("pause", 5)
        message = await ctx.queue.next("second")
        await ctx.step("apply-2", lambda s: s.state.log.append(message.body.n))
        return "done"

    return a


@pytest.mark.parametrize("when", ["before", "after"])
async def test_storage_faults_in_a_wakeup_are_retried_to_the_same_result(when: Literal["before", "after"]) -> None:
    registry = setup(fault_actor("faulty"))
    expected_state, expected_history = await reference_run(registry, "faulty")
    assert expected_state.log == [1, 2]
    injected = 0
    number = 1
    while True:
        async with TestEnv(registry) as env:
            handle = env.client.get_or_create("faulty", ["k"])
            calls = await drive(env, handle, functools.partial(env.store.fail_call, number, when))
            if calls < number:
                break  # the wake-ups made fewer storage calls than `number`: every call was covered
            injected += 1
            assert env.failures, f"fault at call {number} ({when}) went unnoticed"
            assert await handle.state() == expected_state, f"fault at call {number} ({when})"
            assert [(e.location, e.output) for e in await handle.history()] == expected_history
            assert (await handle.status()).output == "done"
            assert env.store.inbox_ids(handle.ref) == []
        number += 1
    assert injected >= 4  # the load and the one commit of each wake-up (step results ride with the suspension)


async def test_a_wake_up_that_ends_waiting_as_it_began_stores_its_record_once_and_copies_it_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The workflow record a wake-up loads is stored already: a loop's wake-up that ends waiting as it began leaves it
    out of its commit (its entries and state go), where the first wake-up, which changed it, stored it; the wake-up
    makes one copy of it, its outcome (none to run on: the engine never changes a record in place)."""
    from dormant.workflow.history import WorkflowRecord

    async with TestEnv(setup(counter_actor("records"))) as env:
        handle = await start(env, "records")  # (its first wake-up: pending -> sleeping, stored)
        assert [c.draft.workflow is not None for c in env.store.commit_log if c.ref == handle.ref][-1]
        copies = 0
        real_copy = WorkflowRecord.model_copy

        def counted(self: WorkflowRecord, **kwargs: Any) -> WorkflowRecord:
            nonlocal copies
            copies += 1
            return real_copy(self, **kwargs)

        monkeypatch.setattr(WorkflowRecord, "model_copy", counted)
        logged = len(env.store.commit_log)
        await handle.send("work", {"n": 3})
        await env.run_until_idle()
        commits = [c.draft for c in env.store.commit_log[logged:] if c.ref == handle.ref]
        assert len(commits) == 1 and commits[0].upserts and commits[0].workflow is None
        assert copies == 1
        status = await handle.status()
        assert status.workflow is WorkflowState.SLEEPING and status.waiting_for.queues == ["work"]
        assert (await handle.state()).value == 3
