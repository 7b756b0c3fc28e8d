"""Steps: recording and replay, retries that suspend, backoff, exhaustion, timeouts, atomic commits."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from pydantic import BaseModel

from dormant import (
    NonRetryableError,
    StepContext,
    StepExhaustedError,
    WorkflowContext,
    WorkflowState,
    actor,
    queue,
    setup,
)
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item, start


class Point(BaseModel):
    x: int
    y: int


async def test_step_result_is_recorded_and_replayed_without_rerunning() -> None:
    calls: list[str] = []
    seen: list[Any] = []
    a = actor("replay", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        def make_point(s: StepContext) -> Point:
            calls.append("point")
            return Point(x=1, y=2)

        point = await ctx.step("point", make_point)
        seen.append(point)  # re-runs on every replay: sees the recorded value each time
        for i in range(3):
            message = await ctx.queue.next(f"wait-{i}")

            def add(s: StepContext, n: int = message.body.n) -> int:
                calls.append("add")
                s.state.value += n
                return int(s.state.value)

            await ctx.step(f"add-{i}", add)
        return point

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "replay")
        for n in (1, 2, 3):
            await handle.send("go", {"n": n})
            await env.run_until_idle()
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED
        # The model comes back in its JSON form, on the first run and on every replay alike.
        assert status.output == {"x": 1, "y": 2}
        assert seen == [{"x": 1, "y": 2}] * 4  # one first run + three wake-ups
        assert calls.count("point") == 1
        assert calls.count("add") == 3
        assert (await handle.state()).value == 6
        outputs = {e.location: e.output for e in await handle.history()}
        assert outputs["point"] == {"x": 1, "y": 2}
        assert [outputs[f"add-{i}"] for i in range(3)] == [1, 3, 6]


async def test_sync_and_async_step_bodies() -> None:
    a = actor("bodies", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> list[int]:
        def sync_body(s: StepContext) -> int:
            s.state.value += 1
            return 10

        async def async_body(s: StepContext) -> int:
            await asyncio.sleep(0)
            s.state.value += 2
            return 20

        return [await ctx.step("sync", sync_body), await ctx.step("async", async_body)]

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "bodies")
        assert (await handle.status()).output == [10, 20]
        assert (await handle.state()).value == 3


def _retry_time(status: Any) -> float | None:
    assert status.waiting_for.deadline is None  # a pure retry shows as retry_at
    return status.waiting_for.retry_at  # type: ignore[no-any-return]


async def test_retries_suspend_until_their_time_with_capped_exponential_backoff() -> None:
    attempts_at: list[float] = []
    a = actor("backoff", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> str:
        def always_fails(s: StepContext) -> None:
            attempts_at.append(s.now())
            raise RuntimeError(f"attempt {s.attempt} failed")

        try:
            await ctx.step("flaky", always_fails, max_retries=5, retry_backoff_base=1.0, retry_backoff_max=3.0)
        except StepExhaustedError as error:
            return f"gave up after {error.attempts}: {error.error_type}"
        return "unreachable"

    async with TestEnv(setup(a)) as env:
        t0 = env.now()
        handle = await start(env, "backoff")
        assert attempts_at == [t0]  # never retried inline
        status = await handle.status()
        assert status.workflow is WorkflowState.SLEEPING
        assert _retry_time(status) == t0 + 2.0  # as RivetKit: base * 2**attempt, so the first retry waits 2 x base
        await env.advance(1.999)
        assert len(attempts_at) == 1  # not before its time
        await env.advance(0.001)
        assert len(attempts_at) == 2
        assert _retry_time(await handle.status()) == t0 + 2.0 + 3.0
        await env.advance(60)
        # Delays 2, then 4 capped at 3: 3, 3, 3, 3.
        assert [round(t - t0, 6) for t in attempts_at] == [0, 2, 5, 8, 11, 14]
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED
        assert status.output == "gave up after 6: RuntimeError"
        entry = next(e for e in await handle.history() if e.location == "flaky")
        assert entry.status == "failed" and entry.attempts == 6


async def test_retry_succeeds_and_early_wakeups_do_not_rerun_the_step() -> None:
    calls: list[int] = []
    a = actor("retry-ok", state=Counter, queues={"poke": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        def flaky(s: StepContext) -> int:
            calls.append(s.attempt)
            if s.attempt < 3:
                raise RuntimeError("not yet")
            return s.attempt

        return await ctx.step("flaky", flaky, retry_backoff_base=5.0)  # retries after 10 s, then 20 s

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "retry-ok")
        # A message wakes the actor early: the step is still waiting for its retry time.
        await handle.send("poke", {"n": 1})
        await env.run_until_idle()
        await env.transport.wake(handle.ref)
        await env.run_until_idle()
        assert calls == [1]
        await env.advance(10)
        assert calls == [1, 2]
        await env.advance(20)
        assert calls == [1, 2, 3]
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED and status.output == 3


async def test_non_retryable_failure_fails_at_once_and_never_reruns() -> None:
    calls: list[str] = []
    caught: list[str] = []
    a = actor("nonretry", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> int:
        def declined(s: StepContext) -> None:
            calls.append("declined")
            raise NonRetryableError("card declined")

        try:
            await ctx.step("charge", declined, max_retries=10)
        except StepExhaustedError as error:
            caught.append(f"{error.attempts}:{error.error_type}:{error.error_message}")
        message = await ctx.queue.next("wait")
        return int(message.body.n)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "nonretry")
        await env.advance(3600)
        await handle.send("go", {"n": 7})
        await env.run_until_idle()
        assert calls == ["declined"]  # the recorded failure is replayed, never re-run
        assert caught == ["1:NonRetryableError:card declined"] * 2
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED and status.output == 7


async def test_exhausted_step_stays_failed_on_later_wakeups() -> None:
    calls: list[int] = []
    a = actor("exhausted", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> str:
        def broken(s: StepContext) -> None:
            calls.append(s.attempt)
            raise ValueError("nope")

        with contextlib.suppress(StepExhaustedError):
            await ctx.step("broken", broken, max_retries=1, retry_backoff_base=1.0)
        await ctx.queue.next("wait")
        try:
            await ctx.step("broken-again", broken, max_retries=0)
        except StepExhaustedError as error:
            return error.step
        return "unreachable"

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "exhausted")
        await env.advance(5)
        assert calls == [1, 2]
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        assert calls == [1, 2, 1]
        assert (await handle.status()).output == "broken-again"


async def test_uncaught_step_failure_fails_the_workflow_and_is_not_rerun() -> None:
    calls: list[int] = []
    a = actor("uncaught", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        def fatal(s: StepContext) -> None:
            calls.append(1)
            raise NonRetryableError("fatal")

        await ctx.step("fatal", fatal)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "uncaught")
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and "NonRetryableError: fatal" in status.error
        await handle.send("go", {"n": 1})
        await env.advance(100)
        assert calls == [1]
        assert (await handle.status()).workflow is WorkflowState.FAILED


async def test_step_timeout_cancels_the_coroutine_and_counts_as_a_failed_attempt() -> None:
    events: list[str] = []
    a = actor("timeout", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def slow_then_fast(s: StepContext) -> str:
            events.append(f"start {s.attempt}")
            if s.attempt == 1:
                s.state.value += 100  # must not survive the cancelled attempt
                try:
                    await asyncio.sleep(30)  # real time: cut short by the 50 ms timeout
                except asyncio.CancelledError:
                    events.append("cancelled")
                    raise
                events.append("not cancelled")
            s.state.value += 1
            return f"done on attempt {s.attempt}"

        first = await ctx.step("slow", slow_then_fast, timeout=0.05, max_retries=1, retry_backoff_base=0.5)

        async def hang(s: StepContext) -> None:
            await asyncio.sleep(30)

        try:
            await ctx.step("hang", hang, timeout=0.02, max_retries=0)
        except StepExhaustedError as error:
            return [first, error.error_type, error.attempts]
        return "unreachable"

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "timeout")
        assert events == ["start 1", "cancelled"]
        status = await handle.status()
        assert status.workflow is WorkflowState.SLEEPING  # the timed-out attempt is retried later
        await env.advance(1)
        status = await handle.status()
        assert status.output == ["done on attempt 2", "StepTimeoutError", 1]
        assert events == ["start 1", "cancelled", "start 2"]
        assert (await handle.state()).value == 1
        entry = next(e for e in await handle.history() if e.location == "slow")
        assert entry.attempts == 2


async def test_failed_attempt_state_changes_are_not_kept() -> None:
    a = actor("revert", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        def first(s: StepContext) -> None:
            s.state.value = 5
            s.state.log.append("first")

        def flaky(s: StepContext) -> None:
            s.state.value += 1000
            s.state.log.append(f"flaky attempt {s.attempt}")
            if s.attempt == 1:
                raise RuntimeError("boom")

        await ctx.step("first", first)
        await ctx.step("flaky", flaky, retry_backoff_base=0.5)  # the retry comes 1 s later

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "revert")
        state = await handle.state()
        assert state.value == 5 and state.log == ["first"]
        await env.advance(1)
        state = await handle.state()
        assert state.value == 1005
        assert state.log == ["first", "flaky attempt 2"]


async def test_state_changes_commit_atomically_with_the_step_entry() -> None:
    a = actor("atomic", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def body(loop: WorkflowContext) -> None:
            message = await loop.queue.next("wait")

            def apply(s: StepContext) -> None:
                s.state.value += message.body.n

            await loop.step("apply", apply)

        await ctx.loop("main", body)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "atomic")
        for n in (1, 10, 100):
            await handle.send("go", {"n": n})
        await env.run_until_idle()
        assert (await handle.state()).value == 111
        state_commits = [c.draft for c in env.store.commit_log if c.ref == handle.ref and c.draft.state is not None]
        assert [d.state["value"] for d in state_commits if d.state] == [1, 11, 111]
        for draft in state_commits:
            applied = [u for u in draft.upserts if u["location"].endswith("/apply")]
            assert len(applied) == 1 and applied[0]["status"] == "completed"
        consumed = 0
        for entry in env.store.commit_log:
            # A message leaves the inbox in the same commit that records its receipt (the receipt may ride
            # with the previous step's result: both are committed before the next step runs).
            received = [m["id"] for u in entry.draft.upserts if u["kind"] == "message" for m in u.get("messages", [])]
            assert sorted(entry.draft.consumed_ids) == sorted(received)
            consumed += len(received)
        assert consumed == 3
        assert env.store.inbox_ids(handle.ref) == []


@pytest.mark.parametrize("max_retries", [-1])
async def test_invalid_step_options_fail_the_workflow(max_retries: int) -> None:
    a = actor("bad-options", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("x", lambda s: 1, max_retries=max_retries)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "bad-options")
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and "max_retries" in status.error


async def test_a_step_records_when_its_last_attempt_ran_so_its_duration_leaves_out_failures() -> None:
    """An instant body that failed, waited 30 s and then succeeded took 0 s, not 30 (created..updated)."""
    a = actor("timed", state=Counter)
    env_box: list[TestEnv] = []

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        def flaky(s: StepContext) -> int:
            if s.attempt == 1:
                env_box[0].clock.advance(0.5)  # the failed attempt ran for half a second
                raise RuntimeError("not yet")
            env_box[0].clock.advance(2.0)  # the successful one for two seconds
            return s.attempt

        return await ctx.step("flaky", flaky, retry_backoff_base=15.0)  # the retry waits 30 s

    async with TestEnv(setup(a)) as env:
        env_box.append(env)
        handle = await start(env, "timed")
        failed = next(e for e in await handle.history() if e.name == "flaky")
        assert failed.started_at is not None and failed.ended_at is not None
        assert failed.ended_at - failed.started_at == 0.5 and failed.retry_at is not None
        await env.advance(40)  # (past the retry and the attempt's own two seconds)
        done = next(e for e in await handle.history() if e.name == "flaky")
        assert done.status.value == "completed" and done.attempts == 2
        assert done.started_at is not None and done.ended_at is not None
        assert done.ended_at - done.started_at == 2.0
        assert done.started_at >= failed.ended_at + 30
        assert done.updated_at - done.created_at >= 32.5  # what the dashboard used to show
