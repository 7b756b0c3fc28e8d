"""Keyed and prioritized flow control: one charge at a time per customer, customers in parallel, an urgent payment
ahead of the customer's batch charges. Each charge waits for a gate the test opens, so which charges run together is
decided by the limit, not by timing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dormant.testing import TestEnv
from examples import keyed_limits
from examples.keyed_limits import Provider, registry


async def until(check: Any, what: str) -> None:
    for _ in range(500):
        if await check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


@pytest.mark.memory_only("the charges wait for gates inside their steps, so the wake-ups must run by themselves, which "
                          "AwsTestEnv's do only in run_until_idle; the same slot rules on DynamoDB are "
                          "tests/contract/test_slots.py's")
async def test_one_charge_per_customer_at_a_time_customers_in_parallel_urgent_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    gates: dict[str, asyncio.Event] = {}
    started: list[str] = []

    async def charge(customer: str, payment: str, cents: int) -> str:
        started.append(payment)
        gates.setdefault(payment, asyncio.Event())
        await gates[payment].wait()
        return f"ch_{payment}"

    monkeypatch.setattr(keyed_limits, "provider", Provider(charge=charge))
    async with TestEnv(registry) as env:
        def handle(customer: str, payment: str) -> Any:
            return env.client.get_or_create("payment", [customer, payment])

        async def sleeping(customer: str, payment: str) -> bool:
            return bool((await handle(customer, payment).status()).workflow == "sleeping")

        await handle("alice", "a-1").send("pay", {"cents": 100})
        await until(lambda: _true("a-1" in started), "alice's first charge runs")
        await handle("bob", "b-1").send("pay", {"cents": 200})
        await until(lambda: _true("b-1" in started), "bob's charge runs beside alice's")  # two keys at once
        await handle("alice", "a-batch").send("pay", {"cents": 300})
        await until(lambda: sleeping("alice", "a-batch"), "alice's batch charge waits")
        env.clock.advance(1)
        await handle("alice", "a-refund").send("pay", {"cents": 50, "urgent": True})
        await until(lambda: sleeping("alice", "a-refund"), "alice's urgent payment waits")
        status = await handle("alice", "a-refund").status()
        assert status.waiting_for.limits == ['per-customer key="alice" priority=1']
        assert started == ["a-1", "b-1"]  # alice's others wait for her slot

        for payment in ("b-1", "a-1"):
            gates[payment].set()
        await until(lambda: _true("a-refund" in started), "the urgent payment takes alice's slot")
        assert "a-batch" not in started  # queued first, but priority 5
        gates["a-refund"].set()
        await until(lambda: _true("a-batch" in started), "then the batch charge")
        gates["a-batch"].set()
        await env.run_until_idle()
        for customer, payment in (("alice", "a-1"), ("bob", "b-1"), ("alice", "a-batch"), ("alice", "a-refund")):
            assert (await handle(customer, payment).call("get_state")).charge_id == f"ch_{payment}"
    assert started == ["a-1", "b-1", "a-refund", "a-batch"]


async def _true(value: bool) -> bool:
    return value
