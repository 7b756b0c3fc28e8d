"""`ctx.try_step` and `ctx.try_`: failures as values, replayed exactly (RivetKit's tryStep and try)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from dormant import (
    NonRetryableError,
    StepContext,
    StepExhaustedError,
    StepResult,
    TryResult,
    WorkflowContext,
    WorkflowState,
    actor,
    queue,
    setup,
)
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item, raw_history, start

CALLS: list[str] = []


def flaky(name: str) -> Any:
    def body(s: StepContext) -> None:
        CALLS.append(name)
        raise RuntimeError(f"{name} is down")
    return body


def record(name: str) -> Any:
    def body(s: StepContext) -> str:
        CALLS.append(name)
        s.state.log.append(name)
        return name
    return body


async def test_try_step_returns_exhaustion_as_a_value_and_the_workflow_goes_on_and_replays_it() -> None:
    CALLS.clear()
    results: list[StepResult] = []
    a = actor("try-step", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        result = await ctx.try_step("charge", flaky("charge"), max_retries=2, retry_backoff_base=1)
        results.append(result)
        if not result.ok:
            await ctx.step("notify", record("notify"))
        await ctx.queue.next("wait")  # a later wake-up replays the failure from history
        return result.failure.kind if result.failure else None

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "try-step")
        for _ in range(2):
            await env.advance(10)  # the two retries
        assert CALLS == ["charge"] * 3 + ["notify"]
        failure = results[-1].failure
        assert not results[-1].ok and failure is not None
        assert (failure.kind, failure.step_name, failure.attempts) == ("exhausted", "charge", 3)
        assert (failure.error.name, failure.error.message) == ("RuntimeError", "charge is down")
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED and status.output == "exhausted"
        assert CALLS == ["charge"] * 3 + ["notify"]  # the replay ran nothing again
        assert results[-1] == results[-2]  # and returned the same failure


async def test_try_step_kinds_and_what_catch_leaves_out() -> None:
    outcomes: dict[str, Any] = {}
    a = actor("kinds", state=Counter)

    def critical(s: StepContext) -> None:
        raise NonRetryableError("declined")

    async def slow(s: StepContext) -> None:
        await asyncio.Event().wait()  # never finishes: only the step's timeout ends it

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        ok = await ctx.try_step("ok", lambda s: 42)
        outcomes["ok"] = (ok.ok, ok.value, ok.failure)
        crit = await ctx.try_step("critical", critical)
        assert crit.failure is not None
        outcomes["critical"] = (crit.failure.kind, crit.failure.attempts)
        timed = await ctx.try_step("slow", slow, timeout=0.01, max_retries=0)
        assert timed.failure is not None
        outcomes["slow"] = (timed.failure.kind, timed.failure.error.name)
        await ctx.try_step("uncaught", critical, catch=("exhausted",))  # a critical failure is not caught here

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "kinds")
        assert outcomes == {"ok": (True, 42, None), "critical": ("critical", 1),
                            "slow": ("timeout", "StepTimeoutError")}
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and StepExhaustedError.__name__ in status.error and "declined" in status.error


async def test_try_catches_a_failing_join_and_replays_it_without_running_anything() -> None:
    CALLS.clear()
    results: list[TryResult] = []
    a = actor("try-join", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def fan_out(block: WorkflowContext) -> Any:
            async def good(branch: WorkflowContext) -> Any:
                return await branch.step("good", record("good"))

            async def bad(branch: WorkflowContext) -> Any:
                return await branch.step("bad", flaky("bad"), max_retries=0)

            return await block.join("fan", {"good": good, "bad": bad})

        result = await ctx.try_("attempt", fan_out)
        results.append(result)
        await ctx.queue.next("wait")
        return result.ok

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "try-join")
        first = results[-1]
        assert not first.ok and first.failure is not None
        assert (first.failure.source, first.failure.name, first.failure.error.name) == ("join", "fan", "JoinError")
        assert "bad is down" in first.failure.error.message
        ran = sorted(CALLS)
        assert ran == ["bad", "good"]
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        assert (await handle.status()).workflow is WorkflowState.COMPLETED
        assert sorted(CALLS) == ran  # replayed: no step ran again
        assert results[-1] == first
        entry = {e.location: e for e in await handle.history()}["attempt"]
        assert entry.kind == "try" and entry.status == "failed"


async def test_try_returns_the_value_sources_and_rethrows_what_catch_leaves_out() -> None:
    seen: dict[str, Any] = {}
    a = actor("try-sources", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def fine(block: WorkflowContext) -> int:
            return len(await block.step("one", lambda s: "abc"))

        async def failing_step(block: WorkflowContext) -> None:
            await block.step("boom", flaky("boom"), max_retries=0)

        async def own_error(block: WorkflowContext) -> None:
            raise ValueError("bad input")

        ok = await ctx.try_("fine", fine)
        seen["fine"] = (ok.ok, ok.value)
        step = await ctx.try_("step", failing_step)
        assert step.failure is not None and step.failure.step is not None
        seen["step"] = (step.failure.source, step.failure.name, step.failure.step.kind, step.failure.step.attempts)
        block = await ctx.try_("block", own_error, catch=("block",))
        assert block.failure is not None
        seen["block"] = (block.failure.source, block.failure.name, block.failure.error.name)
        await ctx.try_("uncaught", own_error)  # "block" is not caught by default: the workflow fails

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "try-sources")
        assert seen == {"fine": (True, 3), "step": ("step", "boom", "exhausted", 1),
                        "block": ("block", "block", "ValueError")}
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED and status.error == "ValueError: bad input"


async def test_try_lets_suspensions_through_and_finishes_after_them() -> None:
    a = actor("try-wait", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def waits(block: WorkflowContext) -> int:
            message = await block.queue.next("wait")
            return int(message.body.n)

        result = await ctx.try_("waiting", waits, catch=("step", "join", "race", "map", "block"))
        return result.value

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "try-wait")
        assert (await handle.status()).workflow is WorkflowState.SLEEPING  # not caught as a failure
        await handle.send("go", {"n": 7})
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED and status.output == 7


@pytest.mark.parametrize("catch", [("nope",), "rollback"])
async def test_an_unknown_catch_is_a_definition_error(catch: Any) -> None:
    a = actor("bad-catch", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.try_step("s", lambda s: 1, catch=catch)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "bad-catch")
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and "WorkflowDefinitionError" in status.error and "catch" in status.error


async def test_a_failed_step_recorded_before_failure_kinds_replays_through_try_step() -> None:
    """Histories written before failed steps recorded their `failure_kind`: the kind is read from the record."""
    a = actor("old-failure", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def v1(ctx: WorkflowContext) -> None:
        with contextlib.suppress(StepExhaustedError):
            await ctx.step("charge", flaky("charge"), max_retries=0)
        await ctx.queue.next("wait")

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "old-failure")
        stripped = [item.pop("failure_kind") for item in raw_history(env.store, handle.ref).values()
                    if "failure_kind" in item]
        assert stripped == ["exhausted"]  # now stored as an older version stored it: without
        store = env.store
    kinds: list[str] = []
    b = actor("old-failure", state=Counter, queues={"go": queue(Item)})

    @b.workflow
    async def v2(ctx: WorkflowContext) -> None:
        result = await ctx.try_step("charge", flaky("charge"), max_retries=0)
        assert result.failure is not None
        kinds.append(result.failure.kind)
        await ctx.queue.next("wait")

    CALLS.clear()
    async with TestEnv(setup(b), store=store) as env:
        handle = env.client.get_or_create("old-failure", ["k"])
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        assert (await handle.status()).workflow is WorkflowState.COMPLETED
        assert kinds == ["exhausted"] and CALLS == []


async def test_a_finished_block_replays_sealed_so_a_later_failure_compensates_its_steps() -> None:
    CALLS.clear()
    a = actor("try-rollback", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.rollback_checkpoint("start")

        async def book(block: WorkflowContext) -> str:
            return str(await block.step("book", record("book"), rollback=lambda s, out: CALLS.append(f"undo {out}")))

        booked = await ctx.try_("booking", book)
        assert booked.ok and booked.value == "book"
        await ctx.queue.next("wait")  # the next wake-up replays the finished block
        await ctx.step("charge", flaky("charge"), max_retries=0)  # fails the workflow: the rollback runs

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "try-rollback")
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        assert (await handle.status()).workflow is WorkflowState.FAILED
        assert CALLS == ["book", "charge", "undo book"]
