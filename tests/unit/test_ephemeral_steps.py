"""`ctx.step(..., ephemeral=True)`: no commit of its own; the next durable commit stores it; a crash before that
re-runs it."""

from __future__ import annotations

from typing import Any

from dormant import StepContext, WorkflowContext, WorkflowState, actor, queue, setup
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item

RAN: list[str] = []


def bump(name: str) -> Any:
    def body(s: StepContext) -> int:
        RAN.append(name)
        s.state.value += 1
        s.state.log.append(name)
        return int(s.state.value)
    return body


def three_steps(name: str, *, ephemeral: bool) -> Any:
    a = actor(name, state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("a", bump("a"), ephemeral=ephemeral)
        await ctx.step("b", bump("b"), ephemeral=ephemeral)
        await ctx.step("c", bump("c"))
        await ctx.queue.next("wait")

    return a


async def _commits_of_first_run(definition: Any) -> tuple[int, TestEnv]:
    env = TestEnv(setup(definition))
    await env.__aenter__()
    handle = env.client.get_or_create(definition.name, ["k"])
    await handle.status()  # created
    before = len(env.store.commit_log)
    await env.run_until_idle()
    return len(env.store.commit_log) - before, env


async def test_two_ephemeral_steps_and_one_durable_step_make_one_commit() -> None:
    commits, env = await _commits_of_first_run(three_steps("ephemeral", ephemeral=True))
    try:
        assert commits == 1
        handle = env.client.get_or_create("ephemeral", ["k"])
        assert (await handle.state()).log == ["a", "b", "c"]  # the state changes rode with it
        assert [e.location for e in await handle.history()] == ["a", "b", "c"]
    finally:
        await env.__aexit__(None, None, None)
    durable, env = await _commits_of_first_run(three_steps("durable", ephemeral=False))
    await env.__aexit__(None, None, None)
    assert durable == 3  # the same steps, durable: each result committed before the next step starts


async def test_a_crash_before_the_durable_commit_runs_the_ephemeral_steps_again() -> None:
    RAN.clear()
    async with TestEnv(setup(three_steps("crashy", ephemeral=True))) as env:
        handle = env.client.get_or_create("crashy", ["k"])
        await handle.status()
        armed = [True]

        def crash_the_first_commit(number: int, operation: str) -> None:
            if operation == "commit" and armed[0]:
                armed[0] = False
                env.store.fail_call(0)  # this very call fails before it changes anything

        env.store.on_call = crash_the_first_commit
        await env.run_until_idle()
        env.store.on_call = None
        assert not armed[0] and len(env.failures) == 1  # the wake-up crashed once, and was redelivered
        assert RAN == ["a", "b", "c", "a", "b", "c"]  # at least once: the lost results ran again
        assert (await handle.state()).log == ["a", "b", "c"]  # the crashed run left nothing behind
        assert (await handle.status()).workflow is WorkflowState.SLEEPING


async def test_a_failed_attempt_after_an_ephemeral_step_keeps_that_steps_state() -> None:
    RAN.clear()
    a = actor("ephemeral-then-retry", state=Counter)
    failures = [1]

    def then_flaky(s: StepContext) -> None:
        s.state.log.append("half-done")  # reverted: the attempt fails
        if failures[0]:
            failures[0] -= 1
            raise RuntimeError("once")

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("a", bump("a"), ephemeral=True)
        await ctx.step("flaky", then_flaky, retry_backoff_base=1)

    async with TestEnv(setup(a)) as env:
        handle = env.client.get_or_create("ephemeral-then-retry", ["k"])
        await handle.status()
        await env.run_until_idle()
        assert (await handle.state()).log == ["a"]  # the ephemeral step's change stays, the failed attempt's goes
        await env.advance(5)
        assert (await handle.state()).log == ["a", "half-done"]
        assert RAN == ["a"] and env.failures == []
