"""Child worker orchestration: start children, fan batches out to them, stop them on shutdown."""

from __future__ import annotations

import pytest

from dormant.testing import TestEnv
from examples.child_workers import CHILDREN, registry
from tests.examples.idle import assert_idle_timeout


async def test_orchestrates_the_children_lifecycle() -> None:
    async with TestEnv(registry) as env:
        orchestrator = env.client.get_or_create("orchestrator", ["main"])
        children = [env.client.get_or_create("child-worker", [key]) for key in CHILDREN.values()]
        await orchestrator.status()
        await env.run_until_idle()
        assert [(await c.get_state()).running for c in children] == [True, True, True]

        await orchestrator.send("batches", {"payload": 5})
        await env.run_until_idle()
        assert (await orchestrator.call("get_state")).last_total == 45
        await orchestrator.send("batches", {"payload": 2})
        await env.run_until_idle()
        state = await orchestrator.state()
        assert (state.last_total, state.batches) == (18, 2)
        assert [(await c.get_state()).processed for c in children] == [2, 2, 2]
        join = [e for e in await orchestrator.history() if e.kind.value == "join"][-1]
        assert {b: r.output for b, r in join.branches.items()} == {"a": 6, "b": 6, "c": 6}
        await assert_idle_timeout(env, orchestrator, "orchestrate-loop", 30)

        await orchestrator.send("shutdown", {})
        await env.run_until_idle()
        assert (await orchestrator.status()).workflow == "completed"
        assert [(await c.get_state()).running for c in children] == [False, False, False]


async def test_children_refuse_work_until_started() -> None:
    async with TestEnv(registry) as env:
        child = env.client.get_or_create("child-worker", ["stray"])
        with pytest.raises(RuntimeError, match="not running"):
            await child.process(1)
        await child.start()
        assert await child.process(1) == 3
