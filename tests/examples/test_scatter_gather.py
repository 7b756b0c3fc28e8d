"""Scatter-gather: one join, three shard actor calls, one sum; each shard called once per request."""

from __future__ import annotations

from dormant.testing import TestEnv
from examples.scatter_gather import registry
from tests.examples.idle import assert_idle_timeout


async def test_gathers_the_three_shards() -> None:
    async with TestEnv(registry) as env:
        gatherer = env.client.get_or_create("scatter-gather", ["main"])
        await gatherer.send("scatter", {"input": 2})
        await env.run_until_idle()

        state = await gatherer.call("get_state")
        assert state.last_parts == {"a": 20, "b": 20, "c": 20}
        assert state.last_sum == 60
        join = next(e for e in await gatherer.history() if e.kind.value == "join")
        assert join.location.endswith("/gather")
        assert {b: (r.status.value, r.output) for b, r in join.branches.items()} == {
            "a": ("completed", 20), "b": ("completed", 20), "c": ("completed", 20)}

        await gatherer.send("scatter", {"input": 3})
        await env.run_until_idle()
        assert (await gatherer.state()).last_sum == 90
        for shard_id in ("a", "b", "c"):
            assert (await env.client.get_or_create("shard", [shard_id]).get_state()).calls == 2
        await assert_idle_timeout(env, gatherer, "scatter-gather-loop", 30)
