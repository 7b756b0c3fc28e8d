"""`ctx.get_version`: code changes under running actors without divergence (RivetKit's getVersion)."""

from __future__ import annotations

from typing import Any

import pytest

from dormant import StepContext, WorkflowContext, WorkflowState, actor, queue, setup
from dormant.testing import TestEnv
from dormant.workflow.errors import WorkflowDefinitionError
from tests.unit.support import Counter, Item, start

RAN: list[str] = []


def _log(name: str) -> Any:
    def body(s: StepContext) -> str:
        RAN.append(name)
        s.state.log.append(name)
        return name
    return body


def order_actor(*, audited: bool) -> Any:
    """v1: "reserve", "pack", a wait, "ship". v2 (`audited`) inserts "audit" between the two recorded steps."""
    a = actor("versioned", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        await ctx.step("reserve", _log("reserve"))
        if audited and await ctx.get_version("add-audit", 2) >= 2:
            await ctx.step("audit", _log("audit"))
        await ctx.step("pack", _log("pack"))
        await ctx.queue.next("wait-go")
        await ctx.step("ship", _log("ship"))
        return "done"

    return a


async def test_an_actor_recorded_under_v1_replays_on_v2_without_running_the_inserted_step() -> None:
    RAN.clear()
    async with TestEnv(setup(order_actor(audited=False))) as env:
        handle = await start(env, "versioned", "old")
        assert RAN == ["reserve", "pack"]
        store = env.store
    async with TestEnv(setup(order_actor(audited=True)), store=store) as env:  # the deploy of v2
        handle = env.client.get_or_create("versioned", ["old"])
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED and status.divergence is None
        assert RAN == ["reserve", "pack", "ship"]  # "audit" never ran for the actor that started on v1
        history = {e.location: e for e in await handle.history()}
        assert history["add-audit"].kind == "version_check" and history["add-audit"].output == 1
        assert "audit" not in history
        # A fresh actor on v2 runs it: its scope has nothing recorded ahead of the check.
        RAN.clear()
        fresh = await start(env, "versioned", "new")
        await fresh.send("go", {"n": 1})
        await env.run_until_idle()
        assert RAN == ["reserve", "audit", "pack", "ship"]
        assert {e.location: e.output for e in await fresh.history()}["add-audit"] == 2


async def test_the_resolution_is_recorded_and_replays_across_later_wakeups() -> None:
    RAN.clear()
    async with TestEnv(setup(order_actor(audited=False))) as env:
        await start(env, "versioned", "old")
        store = env.store
    seen: list[int] = []
    a = actor("versioned", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        await ctx.step("reserve", _log("reserve"))
        version = await ctx.get_version("add-audit", 2)
        seen.append(version)
        await ctx.step("pack", _log("pack"))
        await ctx.queue.next("wait-go")
        await ctx.queue.next("wait-again")  # new code after the recorded wait: the check is still 1
        await ctx.step("ship", _log("ship"))

    async with TestEnv(setup(a), store=store) as env:
        handle = env.client.get_or_create("versioned", ["old"])
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        await handle.send("go", {"n": 2})
        await env.run_until_idle()
        assert (await handle.status()).workflow is WorkflowState.COMPLETED
        assert seen and set(seen) == {1}  # every run (first, then each replay) sees the recorded resolution


async def test_get_version_is_resolved_per_loop_iteration() -> None:
    versions: dict[int, int] = {}

    def make(new: bool) -> Any:
        a = actor("looping", state=Counter, queues={"go": queue(Item)})

        @a.workflow
        async def run(ctx: WorkflowContext) -> None:
            async def iteration(loop: WorkflowContext) -> None:
                version = await loop.get_version("v", 3) if new else None
                await loop.step("tick", lambda s: None)
                message = await loop.queue.next("wait")
                if version is not None:
                    versions[message.body.n] = version
                await loop.step("apply", lambda s: s.state.log.append(message.body.n))

            await ctx.loop("main", iteration)

        return a

    async with TestEnv(setup(make(False))) as env:
        handle = await start(env, "looping")
        await handle.send("go", {"n": 1})
        await env.run_until_idle()  # iteration 0 done; iteration 1 recorded "tick" and waits
        store = env.store
    async with TestEnv(setup(make(True)), store=store) as env:
        handle = env.client.get_or_create("looping", ["k"])
        await handle.send("go", {"n": 2})
        await env.run_until_idle()
        await handle.send("go", {"n": 3})
        await env.run_until_idle()
        # Iteration 1 began under v1 ("tick" is recorded ahead of the check): 1; iteration 2 is new code: 3.
        assert versions == {2: 1, 3: 3}
        assert (await handle.state()).log == [1, 2, 3]
        assert (await handle.status()).divergence is None


@pytest.mark.parametrize("latest", [0, -1, 1.5, "2", True])
async def test_latest_must_be_an_integer_of_at_least_one(latest: Any) -> None:
    a = actor("bad-version", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.get_version("v", latest)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "bad-version")
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and "latest must be an integer >= 1" in status.error
        assert WorkflowDefinitionError.__name__ in status.error


async def test_inserting_a_step_before_recorded_ones_suggests_get_version() -> None:
    async with TestEnv(setup(order_actor(audited=False))) as env:
        await start(env, "versioned", "old")
        store = env.store
    a = actor("versioned", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("reserve", _log("reserve"))
        await ctx.step("audit", _log("audit"))  # inserted without a version check
        await ctx.step("pack", _log("pack"))
        await ctx.queue.next("wait-go")

    async with TestEnv(setup(a), store=store) as env:
        handle = env.client.get_or_create("versioned", ["old"])
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow is WorkflowState.DIVERGED and status.divergence is not None
        assert 'ctx.get_version("audit-added", 2)' in status.divergence.message
        assert 'ctx.removed("pack", "step")' in status.divergence.message  # if it replaced the recorded step


async def test_a_retired_check_is_skipped_wherever_it_was_recorded() -> None:
    RAN.clear()
    async with TestEnv(setup(order_actor(audited=False))) as env:
        await start(env, "versioned", "old")
        store = env.store
    async with TestEnv(setup(order_actor(audited=True)), store=store) as env:  # v2 records the check (after "pack")
        await env.run_until_idle()
        handle = env.client.get_or_create("versioned", ["old"])
        assert [e.location for e in await handle.history()] == ["reserve", "pack", "add-audit"]
    a = actor("versioned", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def v3(ctx: WorkflowContext) -> None:
        await ctx.step("reserve", _log("reserve"))
        await ctx.removed("add-audit", "version_check")  # v3 dropped the old branch
        await ctx.step("pack", _log("pack"))
        await ctx.queue.next("wait-go")

    async with TestEnv(setup(a), store=store) as env:
        handle = env.client.get_or_create("versioned", ["old"])
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED and status.divergence is None


async def test_the_offline_replay_before_a_deploy_accepts_a_guarded_insertion_and_flags_an_unguarded_one() -> None:
    from dormant.runtime.offline import replay_snapshot

    async with TestEnv(setup(order_actor(audited=False))) as env:
        handle = await start(env, "versioned", "old")
        snapshot = await env.store.load(handle.ref)
    assert snapshot is not None
    guarded = await replay_snapshot(setup(order_actor(audited=True)), snapshot.model_copy(deep=True))
    assert guarded.outcome == "ok", guarded.detail
    unguarded = actor("versioned", state=Counter, queues={"go": queue(Item)})

    @unguarded.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("reserve", _log("reserve"))
        await ctx.step("audit", _log("audit"))
        await ctx.step("pack", _log("pack"))

    flagged = await replay_snapshot(setup(unguarded), snapshot.model_copy(deep=True))
    assert flagged.outcome == "diverged" and "get_version" in flagged.detail
