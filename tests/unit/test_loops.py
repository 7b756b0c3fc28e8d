"""Loops: stateless and stateful forms, clear errors, iteration compaction, constant replay cost, nesting."""

from __future__ import annotations

from typing import Any

from dormant import Loop, StepContext, WorkflowContext, WorkflowState, actor, queue, setup
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item, raw_history, reports_for, start


def queue_loop_actor(name: str, *, history_keep: int = 2) -> Any:
    """A worker: each iteration runs a step, waits for a message, then applies it in a step."""
    a = actor(name, state=Counter, queues={"work": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def body(loop: WorkflowContext) -> None:
            await loop.step("begin", lambda s: None)
            message = await loop.queue.next("wait")

            def apply(s: StepContext) -> None:
                s.state.value += message.body.n

            await loop.step("apply", apply)

        await ctx.loop("worker", body, history_keep=history_keep)

    return a


async def test_stateless_loop_processes_every_message() -> None:
    a = queue_loop_actor("stateless")
    async with TestEnv(setup(a)) as env:
        handle = await start(env, "stateless")
        for n in range(1, 6):
            await handle.send("work", {"n": n})
        await env.run_until_idle()
        assert (await handle.state()).value == 15
        loop_entry = next(e for e in await handle.history() if e.location == "worker")
        assert loop_entry.iteration == 5
        assert (await handle.status()).waiting_for.queues == ["work"]


async def test_stateful_loop_carries_state_across_wakeups_and_breaks_with_a_value() -> None:
    seen_states: list[int] = []
    a = actor("stateful", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def body(loop: WorkflowContext, total: int) -> Any:
            seen_states.append(total)
            await loop.sleep("pause", 10)  # every iteration suspends: state must survive the wake-ups
            added = await loop.step("add", lambda s: 5)
            if total + added >= 20:
                return Loop.break_({"total": total + added})
            return Loop.continue_(total + added)

        return await ctx.loop("sum", body, state=0)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "stateful")
        await env.advance(100)
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED
        assert status.output == {"total": 20}
        # Each iteration runs twice (before and after its sleep) with the same input state.
        assert seen_states == [0, 0, 5, 5, 10, 10, 15, 15]


async def test_completed_loop_replays_its_output_without_running_the_body() -> None:
    runs: list[int] = []
    a = actor("done-loop", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def body(loop: WorkflowContext, i: int) -> Any:
            runs.append(i)
            return Loop.break_(i * 10) if i == 2 else Loop.continue_(i + 1)

        result = await ctx.loop("count", body, state=0)
        await ctx.queue.next("wait")
        return result

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "done-loop")
        await handle.send("go", {"n": 0})
        await env.run_until_idle()
        assert (await handle.status()).output == 20
        assert runs == [0, 1, 2]


async def test_stateful_body_returning_none_is_a_clear_error() -> None:
    a = actor("none-state", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def body(loop: WorkflowContext, state: int) -> None:
            await loop.step("s", lambda s: 1)

        await ctx.loop("bad", body, state=0)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "none-state")
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None
        assert 'loop "bad" is stateful but its body returned None' in status.error
        assert "Loop.continue_(state)" in status.error


async def test_loop_body_returning_something_else_is_a_clear_error() -> None:
    a = actor("bad-return", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def body(loop: WorkflowContext) -> int:
            return 3

        await ctx.loop("bad", body)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "bad-return")
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and "returned int" in status.error


def _iterations(locations: list[str], loop: str) -> set[int]:
    prefix = f"{loop}/~"
    return {int(loc[len(prefix):].split("/")[0]) for loc in locations if loc.startswith(prefix)}


async def test_iterations_are_compacted_and_wakeups_replay_a_constant_number_of_entries() -> None:
    replayed: dict[int, int] = {}
    for total in (10, 200):
        a = queue_loop_actor("compact")
        async with TestEnv(setup(a)) as env:
            handle = await start(env, "compact")
            for _ in range(total):
                await handle.send("work", {"n": 1})
            await env.run_until_idle()
            assert (await handle.state()).value == total
            locations = [e.location for e in await handle.history()]
            # The loop entry + the last `history_keep` finished iterations + the current one.
            assert _iterations(locations, "worker") == {total - 2, total - 1, total}
            assert len(raw_history(env.store, handle.ref)) == 1 + 2 * 3 + 1  # begin, wait, apply per iteration
            await handle.send("work", {"n": 1})
            await env.run_until_idle()
            replayed[total] = reports_for(env, handle)[-1].replayed
            assert (await handle.state()).value == total + 1
    # The loop entry and the current iteration's "begin" step, whatever the iteration count.
    assert replayed == {10: 2, 200: 2}


async def test_history_keep_sets_the_inspection_window() -> None:
    a = queue_loop_actor("keep", history_keep=5)
    async with TestEnv(setup(a)) as env:
        handle = await start(env, "keep")
        for _ in range(30):
            await handle.send("work", {"n": 1})
        await env.run_until_idle()
        locations = [e.location for e in await handle.history()]
        assert _iterations(locations, "worker") == set(range(25, 31))


async def test_nested_loops_run_and_replay_across_wakeups() -> None:
    inner_runs: list[tuple[int, int]] = []
    a = actor("nested", state=Counter, queues={"work": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def outer(loop: WorkflowContext, i: int) -> Any:
            async def inner(inner_ctx: WorkflowContext, j: int) -> Any:
                message = await inner_ctx.queue.next("wait")
                inner_runs.append((i, j))

                def apply(s: StepContext) -> None:
                    s.state.log.append([i, j, message.body.n])

                await inner_ctx.step("apply", apply)
                return Loop.break_(j + 1) if j == 1 else Loop.continue_(j + 1)

            count = await loop.loop("inner", inner, state=0)
            await loop.step("outer-done", lambda s: count)
            return Loop.break_(i + 1) if i == 2 else Loop.continue_(i + 1)

        return await ctx.loop("outer", outer, state=0)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "nested")
        for n in range(6):  # one wake-up per message: every iteration is replayed at least once
            await handle.send("work", {"n": n})
            await env.run_until_idle()
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED and status.output == 3
        assert (await handle.state()).log == [[0, 0, 0], [0, 1, 1], [1, 0, 2], [1, 1, 3], [2, 0, 4], [2, 1, 5]]
        assert env.failures == []
        locations = {e.location for e in await handle.history()}
        assert "outer/~2/inner/~1/apply" in locations
        assert "outer/~2/outer-done" in locations
