"""The actors that need an operator (dormant.runtime.attention): failed ones first, then those retrying a step,
found through attention marks that wake-ups write when a retry starts and clear when it ends; stale marks are
dropped when read."""

from __future__ import annotations

from typing import Any

from dormant import StepContext, WorkflowContext, WorkflowState, actor, queue, setup
from dormant.runtime.attention import attention_list
from dormant.runtime.operations import Operator
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item

T_RETRY = 600.0


def shop() -> Any:
    a = actor("order", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        message = await ctx.queue.next("order")

        def charge(s: StepContext) -> str:
            if message.body.n < 0:
                raise ValueError("card declined")
            if message.body.n == 0 and s.attempt == 1:
                raise ConnectionError("the payment provider is down")
            return "charged"

        return await ctx.step("charge", charge, max_retries=1 if message.body.n < 0 else 3,
                              retry_backoff_base=T_RETRY / 2)

    return setup(a)


async def test_failed_first_then_retrying_and_a_retry_that_ends_leaves_the_list() -> None:
    registry = shop()
    async with TestEnv(registry) as env:
        ok, flaky, broken = (env.client.get_or_create("order", [key]) for key in ("ok", "flaky", "broken"))
        await ok.send("go", {"n": 1})
        await flaky.send("go", {"n": 0})  # fails once, retries in 10 minutes
        await broken.send("go", {"n": -1})  # fails twice: a retry, then for good
        await env.run_until_idle()
        found = await attention_list(registry, env.store, "order", limit=10)
        assert [(a.key, a.reason) for a in found.actors] == [(["broken"], "retrying"), (["flaky"], "retrying")]
        flaky_row = found.actors[1]
        assert flaky_row.status is WorkflowState.SLEEPING
        assert flaky_row.detail == "step charge failed 1 attempt(s): ConnectionError: the payment provider is down"
        await env.advance(T_RETRY)
        assert (await flaky.status()).workflow is WorkflowState.COMPLETED
        assert (await broken.status()).workflow is WorkflowState.FAILED
        found = await attention_list(registry, env.store, "order", limit=10)
        assert [(a.key, a.reason) for a in found.actors] == [(["broken"], "failed")]
        assert (await env.store.list_attention("order")).marks == []  # both marks were cleared by their wake-ups
        counts = await Operator(env.service).counts("order")
        assert {s: c.count for s, c in counts.counts.items() if c.count} == {"completed": 2, "failed": 1}
        assert all(c.exact for c in counts.counts.values())


async def test_a_stale_mark_is_dropped_when_read_and_a_limit_truncates() -> None:
    registry = shop()
    async with TestEnv(registry) as env:
        for key in ("a", "b", "c"):
            await env.client.get_or_create("order", [key]).send("go", {"n": -1})
        done = env.client.get_or_create("order", ["done"])
        await done.send("go", {"n": 1})
        await env.advance(4 * T_RETRY)
        await env.store.mark_attention(done.ref, "retry", env.now())  # e.g. left by a crash: the actor is done
        found = await attention_list(registry, env.store, "order", limit=2)
        assert [(a.key, a.reason) for a in found.actors] == [(["a"], "failed"), (["b"], "failed")]
        assert found.truncated
        assert (await env.store.list_attention("order")).marks == []
