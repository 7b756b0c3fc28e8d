"""Keyed and prioritized limits tried from outside in TestEnv (the store's rules on every backend are
tests/contract/test_slots.py's): with `Limit(concurrency=1, keyed=True)` two keys run at once and two steps of one key
never do; waiters of priority 1 run before those of priority 5 queued earlier; the status names key and priority;
a limit_key or priority the limit does not take is a definition error."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from dormant import Limit, StepContext, WorkflowContext, actor, setup
from dormant.cli.render import status_words
from dormant.testing import TestEnv
from dormant.workflow.errors import WorkflowDefinitionError
from tests.unit.support import start
from tests.unit.test_flow import _sleeping, until


async def test_two_keys_run_at_once_and_two_steps_of_one_key_never_do() -> None:
    gates = {name: asyncio.Event() for name in ("a1", "a2", "b1")}
    started = {name: asyncio.Event() for name in gates}
    order = actor("order")

    @order.workflow
    async def run(ctx: WorkflowContext) -> Any:
        customer = await ctx.step("who", lambda s: s.key[0])

        async def charge(s: StepContext) -> str:
            started[s.key[1]].set()
            await gates[s.key[1]].wait()
            return s.key[1]

        return await ctx.step("charge", charge, limit="per-customer", limit_key=customer)

    registry = setup(order, limits={"per-customer": Limit(concurrency=1, keyed=True)})
    async with TestEnv(registry) as env:
        a1, a2, b1 = (env.client.get_or_create("order", [customer, name])
                      for customer, name in (("A", "a1"), ("A", "a2"), ("B", "b1")))
        await a1.status()
        await asyncio.wait_for(started["a1"].wait(), 5)
        await b1.status()
        await asyncio.wait_for(started["b1"].wait(), 5)  # key B runs while key A's slot is held: at once
        await a2.status()
        await until(lambda: _sleeping(a2), "a2 waits for key A's slot")
        assert not started["a2"].is_set()  # held in line, not by timing: a1 holds key A's only slot
        status = await a2.status()
        assert status.waiting_for.limits == ['per-customer key="A"']
        assert 'limit [bold]per-customer key="A"[/bold]' in status_words(status, env.now())
        assert env.store.slots.waiting("per-customer", "A") == [a2.ref]
        assert env.store.slots.waiting("per-customer", "B") == []
        assert list(env.store.slots.held("per-customer", env.now(), "A").values()) == [a1.ref.id]
        gates["b1"].set()  # key B's release wakes nobody of key A
        await until(lambda: _done(b1), "b1 finishes")
        assert not started["a2"].is_set()
        gates["a2"].set()
        gates["a1"].set()
        await env.run_until_idle()
        assert [(await h.status()).output for h in (a1, a2, b1)] == ["a1", "a2", "b1"]


async def _done(handle: Any) -> bool:
    return bool((await handle.status()).workflow == "completed")


async def test_a_waiter_of_priority_1_runs_before_one_of_priority_5_queued_before_it() -> None:
    order: list[str] = []
    gate, started = asyncio.Event(), asyncio.Event()
    payer = actor("payer")

    @payer.workflow
    async def run(ctx: WorkflowContext) -> None:
        priority = await ctx.step("priority", lambda s: int(s.key[1]))

        async def charge(s: StepContext) -> None:
            order.append(s.key[0])
            if s.key[0] == "holder":
                started.set()
                await gate.wait()

        await ctx.step("charge", charge, limit="stripe", priority=priority)

    async with TestEnv(setup(payer, limits={"stripe": Limit(concurrency=1)})) as env:
        await env.client.get_or_create("payer", ["holder", "3"]).status()
        await asyncio.wait_for(started.wait(), 5)
        for name, priority in (("batch", "5"), ("normal", "3"), ("urgent", "1")):  # arriving a second apart
            handle = env.client.get_or_create("payer", [name, priority])
            await handle.status()
            await until(lambda h=handle: _sleeping(h), f"{name} waits")
            if name == "urgent":
                assert (await handle.status()).waiting_for.limits == ["stripe priority=1"]
            env.clock.advance(1)
        gate.set()
        await env.run_until_idle()
    assert order == ["holder", "urgent", "normal", "batch"]


@pytest.mark.parametrize(("limit", "step", "message"), [
    (Limit(concurrency=1, keyed=True), {}, "without limit_key="),
    (Limit(concurrency=1), {"limit_key": "c-1"}, "which is not keyed"),
    (Limit(concurrency=1, keyed=True), {"limit_key": 42}, "takes a str"),
    (Limit(concurrency=1, keyed=True), {"limit_key": ""}, "limit key is 0 bytes"),
    (Limit(concurrency=1, keyed=True), {"limit_key": "k" * 257}, "limit key is 257 bytes"),
    (Limit(concurrency=1, keyed=True), {"limit_key": "a\nb"}, "control"),
    (Limit(concurrency=1), {"priority": 0}, "priority= must be a whole number from 1"),
    (Limit(concurrency=1), {"priority": 6}, "from 1 .served first. to 5"),
    (Limit(concurrency=1), {"priority": True}, "priority="),
    (None, {"priority": 1}, "need limit="),
    (None, {"limit_key": "c-1"}, "need limit="),
])
async def test_a_limit_key_or_priority_the_limit_does_not_take_fails_the_workflow(
        limit: Limit | None, step: dict[str, Any], message: str) -> None:
    ran: list[str] = []
    payer = actor("payer")

    @payer.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.step("charge", lambda s: ran.append("charge"), **({"limit": "stripe"} if limit else {}), **step)

    async with TestEnv(setup(payer, limits={"stripe": limit} if limit else None)) as env:
        status = await (await start(env, "payer")).status()
        assert status.workflow == "failed" and status.error is not None
        assert status.error.startswith("WorkflowDefinitionError: ") and 'step "charge"' in status.error
        assert re.search(message, status.error), status.error
        if isinstance(step.get("limit_key"), str) and len(step["limit_key"]) > 3:
            assert step["limit_key"] not in status.error  # the key is never echoed
    assert ran == []


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Limit(concurrency=1, keyed="yes"), "keyed must be True or False"),  # type: ignore[arg-type]
    (lambda: Limit(concurrency=1, aging=0.5), "aging must be 1 to 3600"),
    (lambda: Limit(concurrency=1, aging=float("inf")), "finite"),
])
def test_keyed_and_aging_are_checked_where_they_are_declared(make: Any, message: str) -> None:
    with pytest.raises(WorkflowDefinitionError, match=message):
        make()
