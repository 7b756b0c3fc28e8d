"""Versioned evolution: v2 continues actors started on v1 by retiring v1's entries; without the
`removed` calls the old actor is stopped as diverged, and a fixed deploy resumes it."""

from __future__ import annotations

from dormant import Registry, WorkflowContext, setup
from dormant.memory.store import MemoryEventStore
from dormant.testing import TestEnv
from examples.versioned_evolution import ACTOR, IDLE, define, main_loop_v2, registry, registry_v1, validate_v2

unsafe = define()


@unsafe.workflow
async def run_without_removed(ctx: WorkflowContext) -> None:
    await ctx.step("validate-v2", validate_v2)  # history has "validate-v1" here
    await ctx.loop("main-loop-v2", main_loop_v2)


registry_unsafe: Registry = setup(unsafe)


async def started_on_v1() -> MemoryEventStore:
    """An actor that ran v1 for three heartbeats."""
    async with TestEnv(registry_v1) as env:
        handle = env.client.get_or_create(ACTOR, ["old"])
        await handle.status()
        for _ in range(3):
            await env.advance(IDLE)
        state = await handle.state()
        assert (state.validated_by, state.heartbeats_v1) == (["v1"], 3)
        return env.store


async def test_v2_continues_an_actor_started_on_v1() -> None:
    store = await started_on_v1()
    async with TestEnv(registry, store=store) as env:
        handle = env.client.get_or_create(ACTOR, ["old"])
        await env.run_until_idle()
        for _ in range(2):
            await env.advance(IDLE)

        state = await handle.call("get_state")
        assert state.validated_by == ["v1", "v2"]
        assert (state.heartbeats_v1, state.heartbeats_v2) == (3, 2)
        assert state.runs == 1 + 3 + 1 + 2
        status = await handle.status()
        assert status.workflow == "sleeping" and status.divergence is None


async def test_fresh_actor_on_v2() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create(ACTOR, ["new"])
        await handle.status()
        await env.advance(IDLE)
        state = await handle.state()
        assert (state.validated_by, state.heartbeats_v1, state.heartbeats_v2) == (["v2"], 0, 1)
        roots = [e.location for e in await handle.history() if "/" not in e.location]
        assert roots == ["validate-v2", "main-loop-v2"]  # removed() leaves nothing in new histories


async def test_v2_without_removed_marks_the_old_actor_diverged() -> None:
    store = await started_on_v1()
    async with TestEnv(registry_unsafe, store=store) as env:
        handle = env.client.get_or_create(ACTOR, ["old"])
        await env.run_until_idle()

        status = await handle.status()
        assert status.workflow == "diverged"
        divergence = status.divergence
        assert divergence is not None
        assert divergence.location == "validate-v2"
        assert divergence.recorded == 'step "validate-v1"'
        assert divergence.requested == 'step "validate-v2"'
        assert divergence.code_site is not None and "test_versioned_evolution.py" in divergence.code_site
        assert 'ctx.removed("validate-v1", "step")' in divergence.message
        assert (await handle.state()).validated_by == ["v1"]  # nothing new ran

    async with TestEnv(registry, store=store) as env:  # the fixed deploy resumes it
        handle = env.client.get_or_create(ACTOR, ["old"])
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow == "sleeping" and status.divergence is None
        assert (await handle.state()).validated_by == ["v1", "v2"]
