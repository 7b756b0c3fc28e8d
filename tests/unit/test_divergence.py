"""Divergence: detected at every scope (root included) before anything new runs, reported with a
readable diff and the user's file:line, never compensated, fixed by a redeploy or `removed()`."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

from dormant import WorkflowContext, WorkflowState, actor, queue, setup
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item, deploy, start

Workflow = Callable[[WorkflowContext], Awaitable[Any]]
THIS_FILE = __file__


def versioned(workflow: Workflow) -> Any:
    """The same actor type ("orders") with another version of its workflow."""
    a = actor("orders", state=Counter, queues={"go": queue(Item)})
    a.workflow(workflow)
    return setup(a)


def here() -> int:
    """The caller's line number + 1: the line of the call that follows."""
    return sys._getframe(1).f_lineno + 1


async def v1(ctx: WorkflowContext) -> str:
    await ctx.step("a", lambda s: "a")
    await ctx.step("b", lambda s: "b")
    await ctx.sleep("pause", 60)
    await ctx.step("c", lambda s: "c")
    return "v1 done"


async def run_v1_until_paused() -> Any:
    async with TestEnv(versioned(v1)) as env:
        handle = await start(env, "orders")
        assert (await handle.status()).workflow is WorkflowState.SLEEPING
        return env.store


async def redeploy(store: Any, workflow: Workflow) -> tuple[TestEnv, Any]:
    env = deploy(versioned(workflow), store)
    await env.__aenter__()
    await env.run_until_idle()
    return env, env.client.get_or_create("orders", ["k"])


async def test_a_renamed_step_at_the_root_diverges_with_a_readable_diff() -> None:
    ran: list[str] = []
    line: list[int] = []

    async def renamed(ctx: WorkflowContext) -> str:
        await ctx.step("a", lambda s: "a")
        line.append(here())
        await ctx.step("b2", lambda s: ran.append("b2"))
        return "unreachable"

    store = await run_v1_until_paused()
    env, handle = await redeploy(store, renamed)
    try:
        status = await handle.status()
        assert status.workflow is WorkflowState.DIVERGED
        assert ran == []  # stopped before running anything new
        info = status.divergence
        assert info is not None
        assert info.location == "b2"
        assert info.recorded == 'step "b"'
        assert info.requested == 'step "b2"'
        assert info.code_site == f"{THIS_FILE}:{line[0]}"
        assert status.error is not None
        for part in ("history diverged at b2", 'history has:   step "b"', 'code asks for: step "b2"',
                     f"test_divergence.py:{line[0]}", 'ctx.removed("b", "step")'):
            assert part in status.error
    finally:
        await env.__aexit__(None, None, None)


async def test_a_changed_kind_diverges() -> None:
    async def changed_kind(ctx: WorkflowContext) -> str:
        await ctx.step("a", lambda s: "a")
        await ctx.sleep("b", 1)
        return "unreachable"

    store = await run_v1_until_paused()
    env, handle = await redeploy(store, changed_kind)
    try:
        info = (await handle.status()).divergence
        assert info is not None
        assert (info.location, info.recorded, info.requested) == ("b", 'step "b"', 'sleep "b"')
    finally:
        await env.__aexit__(None, None, None)


async def test_a_moved_step_is_told_apart_from_a_removed_one() -> None:
    ran: list[str] = []

    async def reordered(ctx: WorkflowContext) -> str:
        await ctx.step("b", lambda s: ran.append("b"))  # b and a swapped
        await ctx.step("a", lambda s: ran.append("a"))
        await ctx.sleep("pause", 60)
        return "unreachable"

    store = await run_v1_until_paused()
    env, handle = await redeploy(store, reordered)
    try:
        status = await handle.status()
        info = status.divergence
        assert info is not None and (info.recorded, info.requested) == ('step "a"', 'step "b"')
        assert status.error is not None
        assert 'step "b" is recorded further on in this scope, after step "a"' in status.error
        assert "restore the recorded order" in status.error
        assert "ctx.removed would run it again" in status.error  # retiring "a" is not the fix for a move
        assert ran == []
    finally:
        await env.__aexit__(None, None, None)


async def test_a_name_reused_for_another_kind_is_told_to_take_another_name() -> None:
    async def changed_kind(ctx: WorkflowContext) -> str:
        await ctx.step("a", lambda s: "a")
        await ctx.sleep("b", 1)
        return "unreachable"

    store = await run_v1_until_paused()
    env, handle = await redeploy(store, changed_kind)
    try:
        error = (await handle.status()).error
        assert error is not None
        assert 'History recorded "b" as a step here; the code now asks for a sleep' in error
        assert 'ctx.removed("b", "step") and give the new sleep another name' in error
    finally:
        await env.__aexit__(None, None, None)


async def test_a_removed_entry_without_removed_diverges() -> None:
    async def dropped_b(ctx: WorkflowContext) -> str:
        await ctx.step("a", lambda s: "a")
        await ctx.sleep("pause", 60)
        return "unreachable"

    store = await run_v1_until_paused()
    env, handle = await redeploy(store, dropped_b)
    try:
        info = (await handle.status()).divergence
        assert info is not None
        assert (info.location, info.recorded, info.requested) == ("pause", 'step "b"', 'sleep "pause"')
    finally:
        await env.__aexit__(None, None, None)


async def test_extra_recorded_entries_at_the_root_diverge_when_the_workflow_finishes() -> None:
    line = here()
    async def shorter(ctx: WorkflowContext) -> str:
        await ctx.step("a", lambda s: "a")
        return "finished early"

    store = await run_v1_until_paused()
    env, handle = await redeploy(store, shorter)
    try:
        status = await handle.status()
        assert status.workflow is WorkflowState.DIVERGED  # not "completed"
        assert status.output is None
        info = status.divergence
        assert info is not None
        assert (info.location, info.recorded, info.requested) == ("b", 'step "b"', None)
        assert status.error is not None and "nothing more (the scope finished)" in status.error
        assert info.code_site == f"{THIS_FILE}:{line}"  # the workflow function, not the engine's caller
    finally:
        await env.__aexit__(None, None, None)


async def test_a_diverged_actor_is_not_compensated_and_resumes_after_a_fixed_deploy() -> None:
    undo_log: list[str] = []
    ran: list[str] = []

    def saga(second: str) -> Workflow:
        async def workflow(ctx: WorkflowContext) -> str:
            await ctx.rollback_checkpoint("cp")
            await ctx.step("reserve", lambda s: "r", rollback=lambda s, out: undo_log.append("undo reserve"))
            await ctx.sleep("pause", 60)
            await ctx.step(second, lambda s: ran.append(second))
            return second

        return workflow

    async with TestEnv(versioned(saga("charge"))) as env:
        await start(env, "orders")
        store = env.store

    async def broken(ctx: WorkflowContext) -> str:
        await ctx.rollback_checkpoint("cp")
        await ctx.step("reserve-v2", lambda s: ran.append("reserve-v2"))
        return "unreachable"

    env, handle = await redeploy(store, broken)
    try:
        await env.advance(120)
        status = await handle.status()
        assert status.workflow is WorkflowState.DIVERGED
        assert undo_log == [] and ran == []
    finally:
        await env.__aexit__(None, None, None)

    env, handle = await redeploy(store, saga("charge"))
    try:
        await env.advance(60)
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED, status.error
        assert status.output == "charge" and status.divergence is None and status.error is None
        assert ran == ["charge"] and undo_log == []
    finally:
        await env.__aexit__(None, None, None)


async def test_removed_retires_entries_in_old_histories_and_is_a_no_op_in_new_ones() -> None:
    ran: list[str] = []

    async def migrated(ctx: WorkflowContext) -> str:
        await ctx.step("a", lambda s: "a")
        await ctx.removed("b", "step")
        await ctx.removed("pause", "sleep")
        await ctx.step("c2", lambda s: ran.append("c2"))
        return "migrated"

    store = await run_v1_until_paused()
    env, handle = await redeploy(store, migrated)
    try:
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED, status.error
        assert status.output == "migrated"
        fresh = env.client.get_or_create("orders", ["new"])
        await fresh.status()
        await env.run_until_idle()
        assert (await fresh.status()).output == "migrated"
        assert ran == ["c2", "c2"]
        assert [e.location for e in await fresh.history()] == ["a", "c2"]
    finally:
        await env.__aexit__(None, None, None)


async def test_removed_with_the_wrong_kind_does_not_retire_the_entry() -> None:
    async def wrong_kind(ctx: WorkflowContext) -> str:
        await ctx.step("a", lambda s: "a")
        await ctx.removed("b", "sleep")
        await ctx.sleep("pause", 60)
        return "unreachable"

    store = await run_v1_until_paused()
    env, handle = await redeploy(store, wrong_kind)
    try:
        info = (await handle.status()).divergence
        assert info is not None and info.recorded == 'step "b"'
    finally:
        await env.__aexit__(None, None, None)


def loop_v(step_name: str) -> Workflow:
    async def workflow(ctx: WorkflowContext) -> None:
        async def body(loop: WorkflowContext) -> None:
            message = await loop.queue.next("wait")
            await loop.step(step_name, lambda s: message.body.n)
            await loop.sleep("cool-down", 10)

        await ctx.loop("main", body)

    return workflow


async def test_divergence_inside_a_loop_iteration() -> None:
    async with TestEnv(versioned(loop_v("apply"))) as env:
        handle = await start(env, "orders")
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        store = env.store
    env, handle = await redeploy(store, loop_v("apply-v2"))
    try:
        info = (await handle.status()).divergence
        assert info is not None
        assert (info.location, info.recorded, info.requested) == ("main/~0/apply-v2", 'step "apply"',
                                                                    'step "apply-v2"')
    finally:
        await env.__aexit__(None, None, None)


async def test_unvisited_entries_at_the_end_of_a_loop_iteration_diverge() -> None:
    line: list[int] = []

    async def shorter(ctx: WorkflowContext) -> None:
        line.append(here())
        async def body(loop: WorkflowContext) -> None:
            await loop.queue.next("wait")

        await ctx.loop("main", body)

    async with TestEnv(versioned(loop_v("apply"))) as env:
        handle = await start(env, "orders")
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        store = env.store
    env, handle = await redeploy(store, shorter)
    try:
        info = (await handle.status()).divergence
        assert info is not None
        assert (info.location, info.recorded, info.requested) == ("main/~0/apply", 'step "apply"', None)
        assert info.code_site == f"{THIS_FILE}:{line[0]}"  # the loop body
    finally:
        await env.__aexit__(None, None, None)


def join_v(branch_a: Callable[[WorkflowContext], Awaitable[Any]]) -> Workflow:
    async def workflow(ctx: WorkflowContext) -> Any:
        async def waits(b: WorkflowContext) -> int:
            return int((await b.queue.next("m")).body.n)

        return await ctx.join("j", {"a": branch_a, "b": waits})

    return workflow


async def original_a(b: WorkflowContext) -> str:
    return str(await b.step("x", lambda s: "x"))


async def test_a_completed_join_branch_asking_for_new_entries_diverges() -> None:
    ran: list[str] = []

    async def grown_a(b: WorkflowContext) -> str:
        await b.step("x", lambda s: "x")
        return str(await b.step("y", lambda s: ran.append("y")))

    async with TestEnv(versioned(join_v(original_a))) as env:
        handle = await start(env, "orders")
        store = env.store
    env, handle = await redeploy(store, join_v(grown_a))
    try:
        status = await handle.status()
        assert status.workflow is WorkflowState.DIVERGED
        info = status.divergence
        assert info is not None
        assert info.location == "j/a/y" and info.requested == 'step "y"'
        assert info.recorded is not None and "completed in history" in info.recorded
        assert ran == []
    finally:
        await env.__aexit__(None, None, None)


async def test_divergence_inside_a_join_branch_and_changed_branches() -> None:
    async def renamed_a(b: WorkflowContext) -> str:
        return str(await b.step("x2", lambda s: "x"))

    async with TestEnv(versioned(join_v(original_a))) as env:
        await start(env, "orders")
        store = env.store
    env, handle = await redeploy(store, join_v(renamed_a))
    try:
        info = (await handle.status()).divergence
        assert info is not None
        assert (info.location, info.recorded, info.requested) == ("j/a/x2", 'step "x"', 'step "x2"')
    finally:
        await env.__aexit__(None, None, None)

    async def three_branches(ctx: WorkflowContext) -> Any:
        return await ctx.join("j", {"a": original_a, "b": original_a, "c": original_a})

    env, handle = await redeploy(store, three_branches)
    try:
        info = (await handle.status()).divergence
        assert info is not None and info.location == "j"
        assert info.recorded == "join branches ['a', 'b']"
        assert info.requested == "join branches ['a', 'b', 'c']"
    finally:
        await env.__aexit__(None, None, None)


async def test_divergence_in_a_replayed_race_winner() -> None:
    def race_v(step_name: str) -> Workflow:
        async def workflow(ctx: WorkflowContext) -> Any:
            async def quick(b: WorkflowContext) -> str:
                return str(await b.step(step_name, lambda s: "quick"))

            async def slow(b: WorkflowContext) -> str:
                await b.sleep("nap", 100)
                return "slow"

            result = await ctx.race("r", {"quick": quick, "slow": slow})
            await ctx.queue.next("wait")
            return result.winner

        return workflow

    async with TestEnv(versioned(race_v("q"))) as env:
        await start(env, "orders")
        store = env.store
    env, handle = await redeploy(store, race_v("q2"))
    try:
        info = (await handle.status()).divergence
        assert info is not None
        assert (info.location, info.recorded, info.requested) == ("r/quick/q2", 'step "q"', 'step "q2"')
    finally:
        await env.__aexit__(None, None, None)


async def test_duplicate_names_in_one_scope_are_a_definition_error() -> None:
    a = actor("dupes", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("same", lambda s: 1)
        await ctx.sleep("same", 0)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "dupes")
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and 'duplicate entry name "same"' in status.error


async def test_a_diverged_actor_stays_diverged_and_commits_nothing_on_later_wakeups() -> None:
    async def renamed(ctx: WorkflowContext) -> str:
        await ctx.step("a2", lambda s: "a")
        return "unreachable"

    store = await run_v1_until_paused()
    env, handle = await redeploy(store, renamed)
    try:
        assert (await handle.status()).workflow is WorkflowState.DIVERGED
        commits = len(store.commit_log)
        await handle.send("go", {"n": 1})
        await env.advance(120)
        assert (await handle.status()).workflow is WorkflowState.DIVERGED
        assert len(store.commit_log) == commits
    finally:
        await env.__aexit__(None, None, None)


async def test_a_diverged_branch_stops_its_join_siblings_from_starting_new_entries() -> None:
    ran: list[str] = []

    def join_with(first_step: str) -> Workflow:
        async def workflow(ctx: WorkflowContext) -> Any:
            async def replays_first(b: WorkflowContext) -> str:
                return str(await b.step(first_step, lambda s: "x"))

            async def then_new_work(b: WorkflowContext) -> str:
                await b.sleep("nap", 10)
                await b.step("y", lambda s: ran.append("y"))
                return "y"

            return await ctx.join("j", {"a": replays_first, "b": then_new_work})

        return workflow

    async with TestEnv(versioned(join_with("x"))) as env:
        await start(env, "orders")
        store = env.store
    env, handle = await redeploy(store, join_with("x2"))
    try:
        await env.advance(10)
        await env.transport.wake(handle.ref)  # the nap is over: branch b would run "y" now
        await env.run_until_idle()
        assert (await handle.status()).workflow is WorkflowState.DIVERGED
        assert ran == []
        assert "j/b/y" not in {e.location for e in await handle.history()}
    finally:
        await env.__aexit__(None, None, None)
