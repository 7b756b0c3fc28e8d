"""Rollback: compensation newest-first, exactly once, resumable; checkpoint rules; loops."""

from __future__ import annotations

from typing import Any

from dormant import (
    Loop,
    NonRetryableError,
    StepContext,
    WorkflowContext,
    WorkflowState,
    actor,
    queue,
    setup,
)
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item, start


def saga_actor(name: str, undo_log: list[str], *, flaky_undo: str | None = None) -> Any:
    """Steps a, b (after a queue wait, so their handlers come back through replay) and c, then d fails."""
    a = actor(name, state=Counter, queues={"go": queue(Item)})
    failures = {"left": 1}

    def do(label: str) -> Any:
        def body(s: StepContext) -> str:
            s.state.log.append(f"do {label}")
            return f"{label}-receipt"

        return body

    def undo(label: str) -> Any:
        def handler(s: StepContext, output: Any) -> None:
            undo_log.append(f"undo {label} {output}")
            s.state.log.append(f"undo {label}")
            if label == flaky_undo and failures["left"]:
                failures["left"] -= 1
                raise RuntimeError(f"undo {label} failed")

        return handler

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("before-checkpoint", do("x"))  # no handler: never compensated
        await ctx.rollback_checkpoint("saga")
        await ctx.step("a", do("a"), rollback=undo("a"))
        await ctx.step("b", do("b"), rollback=undo("b"))
        await ctx.queue.next("wait")
        await ctx.step("c", do("c"), rollback=undo("c"))

        def fail(s: StepContext) -> None:
            s.state.log.append("do d")  # reverted with the failed attempt
            raise NonRetryableError("d is impossible")

        await ctx.step("d", fail, rollback=undo("d"))

    return a


async def test_handlers_run_newest_first_exactly_once() -> None:
    undo_log: list[str] = []
    async with TestEnv(setup(saga_actor("saga", undo_log))) as env:
        handle = await start(env, "saga")
        assert undo_log == []
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        assert undo_log == ["undo c c-receipt", "undo b b-receipt", "undo a a-receipt"]
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and "d is impossible" in status.error
        assert (await handle.state()).log == ["do x", "do a", "do b", "do c", "undo c", "undo b", "undo a"]
        # Later wake-ups do not compensate again.
        await handle.send("go", {"n": 2})
        await env.transport.wake(handle.ref)
        await env.advance(3600)
        assert len(undo_log) == 3
        done = {e.location: e.rollback_done for e in await handle.history()}
        assert done == {"before-checkpoint": False, "saga": False, "a": True, "b": True, "wait": False,
                        "c": True, "d": False}


async def test_a_failing_handler_leaves_the_actor_rolling_back_and_resumes_later() -> None:
    undo_log: list[str] = []
    async with TestEnv(setup(saga_actor("saga-retry", undo_log, flaky_undo="b"))) as env:
        handle = await start(env, "saga-retry")
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        assert undo_log == ["undo c c-receipt", "undo b b-receipt"]
        status = await handle.status()
        assert status.workflow is WorkflowState.ROLLING_BACK
        assert status.waiting_for.retry_at is not None
        assert status.error is not None and "d is impossible" in status.error  # the original error
        state = await handle.state()
        assert state.log[-1] == "undo c"  # the failed handler's state change was not kept
        await env.transport.wake(handle.ref)  # an early wake-up does not retry yet
        await env.run_until_idle()
        assert len(undo_log) == 2
        await env.advance(status.waiting_for.retry_at - env.now())
        # c is not compensated twice; b is retried, then a runs.
        assert undo_log == ["undo c c-receipt", "undo b b-receipt", "undo b b-receipt", "undo a a-receipt"]
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert (await handle.state()).log[-3:] == ["undo c", "undo b", "undo a"]


async def test_a_rollback_handler_before_any_checkpoint_is_an_error() -> None:
    ran: list[str] = []
    a = actor("no-checkpoint", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("reserve", lambda s: ran.append("reserve"), rollback=lambda s, out: None)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "no-checkpoint")
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None
        assert status.error.startswith("RollbackCheckpointError")
        assert "rollback_checkpoint" in status.error
        assert ran == []  # detected before the step runs


async def test_completed_loop_iterations_are_not_compensated() -> None:
    undo_log: list[str] = []
    a = actor("loop-saga", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.rollback_checkpoint("cp")
        await ctx.step("setup", lambda s: "setup", rollback=lambda s, out: undo_log.append("undo setup"))

        async def body(loop: WorkflowContext, i: int) -> Any:
            message = await loop.queue.next("wait")

            def reserve(s: StepContext) -> int:
                return i

            await loop.step("reserve", reserve, rollback=lambda s, out: undo_log.append(f"undo reserve {out}"))

            def charge(s: StepContext) -> None:
                if message.body.n < 0:
                    raise NonRetryableError("declined")

            await loop.step("charge", charge)
            return Loop.continue_(i + 1)

        await ctx.loop("orders", body, state=0)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "loop-saga")
        for n in (1, 2, -1):
            await handle.send("go", {"n": n})
            await env.run_until_idle()
        assert (await handle.status()).workflow is WorkflowState.FAILED
        # Only the failing iteration's completed step, then the root step.
        assert undo_log == ["undo reserve 2", "undo setup"]


async def test_join_branch_steps_are_compensated() -> None:
    undo_log: list[str] = []
    a = actor("join-saga", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.rollback_checkpoint("cp")

        def branch(label: str) -> Any:
            async def body(b: WorkflowContext) -> str:
                return str(await b.step("book", lambda s: label,
                                        rollback=lambda s, out: undo_log.append(f"cancel {out}")))

            return body

        await ctx.join("book", {"hotel": branch("hotel"), "flight": branch("flight")})
        await ctx.step("pay", lambda s: (_ for _ in ()).throw(NonRetryableError("no funds")))

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "join-saga")
        assert (await handle.status()).workflow is WorkflowState.FAILED
        assert sorted(undo_log) == ["cancel flight", "cancel hotel"]


async def test_a_caught_step_failure_does_not_compensate() -> None:
    undo_log: list[str] = []
    a = actor("caught", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> str:
        await ctx.rollback_checkpoint("cp")
        await ctx.step("a", lambda s: "a", rollback=lambda s, out: undo_log.append("undo a"))
        try:
            await ctx.step("b", lambda s: (_ for _ in ()).throw(NonRetryableError("no")))
        except Exception:
            return "recovered"
        return "unreachable"

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "caught")
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED and status.output == "recovered"
        assert undo_log == []


async def test_rollback_resumes_inside_the_failed_loop_iteration() -> None:
    undo_log: list[str] = []
    failures = {"left": 1}
    a = actor("loop-resume", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.rollback_checkpoint("cp")
        await ctx.step("open", lambda s: "open", rollback=lambda s, out: undo_log.append("close"))

        async def body(loop: WorkflowContext) -> None:
            message = await loop.queue.next("wait")

            def undo_hold(s: StepContext, out: Any) -> None:
                undo_log.append(f"release {out}")
                if failures["left"]:
                    failures["left"] -= 1
                    raise RuntimeError("release failed")

            await loop.step("hold", lambda s: message.body.n, rollback=undo_hold)

            def check(s: StepContext) -> None:
                if message.body.n < 0:
                    raise NonRetryableError("negative")

            await loop.step("check", check)

        await ctx.loop("items", body)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "loop-resume")
        await handle.send("go", {"n": 1})
        await handle.send("go", {"n": -1})
        await env.run_until_idle()
        assert (await handle.status()).workflow is WorkflowState.ROLLING_BACK
        await env.advance(3600)
        assert (await handle.status()).workflow is WorkflowState.FAILED
        assert undo_log == ["release -1", "release -1", "close"]


async def test_compensation_runs_exactly_once_when_storage_replies_are_lost() -> None:
    injected = 0
    number = 1
    while True:
        undo_log: list[str] = []
        async with TestEnv(setup(saga_actor("saga-crash", undo_log))) as env:
            handle = await start(env, "saga-crash")
            await handle.send("go", {"n": 1})
            calls_before = env.store.calls
            env.store.fail_call(number, "after")  # the call is applied, then its reply is lost
            await env.run_until_idle()
            await env.advance(3600)
            if env.store.calls - calls_before < number:
                break  # every storage call of the failing wake-ups has been hit once
            injected += 1
            assert env.failures
            assert (await handle.status()).workflow is WorkflowState.FAILED
            assert undo_log == ["undo c c-receipt", "undo b b-receipt", "undo a a-receipt"], number
        number += 1
    assert injected >= 4
