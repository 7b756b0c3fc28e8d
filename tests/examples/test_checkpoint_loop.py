"""Checkpoint-friendly loop: payments applied exactly once through failures, crashes and
redeploys; finished iterations are compacted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from dormant.testing import TestEnv
from examples import checkpoint_loop
from examples.checkpoint_loop import Services, registry
from tests.crash.harness import Observation, Scenario, check_crash_safety
from tests.examples.idle import assert_idle_timeout


class FakeLedger:
    """Deduplicates by idempotency key, as a real payment ledger would."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[str, int]] = {}
        self.posts: list[str] = []
        self.fail_next: set[str] = set()

    def reset(self) -> None:
        self.entries.clear()
        self.posts.clear()
        self.fail_next.clear()

    async def post_ledger(self, key: str, payment_id: str, amount: int) -> None:
        self.posts.append(payment_id)
        if payment_id in self.fail_next:
            self.fail_next.discard(payment_id)
            raise ConnectionError("ledger unavailable")
        self.entries.setdefault(key, (payment_id, amount))


@pytest.fixture
def ledger(monkeypatch: pytest.MonkeyPatch) -> FakeLedger:
    fake = FakeLedger()
    monkeypatch.setattr(checkpoint_loop, "services", Services(post_ledger=fake.post_ledger))
    return fake


PAYMENTS = [("p1", 100), ("p2", 250), ("p3", 40)]


async def send_payments(env: TestEnv, payments: list[tuple[str, int]]) -> None:
    handle = env.client.get_or_create("checkpoint-friendly", ["main"])
    for payment_id, amount in payments:
        await handle.send("payments", {"id": payment_id, "amount": amount}, message_id=payment_id)


async def test_a_failed_side_effect_is_retried_without_double_applying(ledger: FakeLedger) -> None:
    ledger.fail_next = {"p2"}
    async with TestEnv(registry) as env:
        await send_payments(env, PAYMENTS)
        await env.run_until_idle()
        await env.advance(1)  # the retry of p2's step waits for its backoff

        state = await env.client.get_or_create("checkpoint-friendly", ["main"]).call("get_state")
        assert state.model_dump() == {"applied_count": 3, "total_amount": 390, "last_payment_id": "p3"}
        assert ledger.posts == ["p1", "p2", "p2", "p3"]
        assert sorted(ledger.entries.values()) == sorted(PAYMENTS)  # one ledger entry per payment
        assert len(ledger.entries) == 3
        handle = env.client.get_or_create("checkpoint-friendly", ["main"])
        await assert_idle_timeout(env, handle, "payment-loop", 30)


async def test_finished_iterations_are_compacted_and_a_redeploy_resumes(ledger: FakeLedger) -> None:
    async with TestEnv(registry) as env:
        await send_payments(env, [(f"p{i}", i) for i in range(1, 51)])
        await env.run_until_idle()
        history = await env.client.get_or_create("checkpoint-friendly", ["main"]).history()
        iterations = {e.location.split("/")[1] for e in history if e.location.startswith("payment-loop/")}
        assert len(iterations) <= 3  # the current one plus a small inspection window, not 50
        store = env.store

    async with TestEnv(registry, store=store) as env:
        await send_payments(env, [("p51", 51)])
        await env.run_until_idle()
        state = await env.client.get_or_create("checkpoint-friendly", ["main"]).state()
        assert (state.applied_count, state.total_amount, state.last_payment_id) == (51, 51 * 52 // 2, "p51")
        assert len(ledger.entries) == 51


async def test_every_storage_fault_leaves_the_same_outcome(ledger: FakeLedger) -> None:
    async def drive(env: TestEnv, retry: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]) -> None:
        handle = env.client.get_or_create("checkpoint-friendly", ["main"])
        for payment_id, amount in PAYMENTS:
            async def send(p: str = payment_id, a: int = amount) -> Any:
                return await handle.send("payments", {"id": p, "amount": a}, message_id=p)

            await retry(send)

    async def observe(env: TestEnv) -> Observation:
        state = await env.client.get_or_create("checkpoint-friendly", ["main"]).state()
        return {"state": state.model_dump(), "ledger": sorted(ledger.entries.values())}

    checked = await check_crash_safety(Scenario("checkpoint-loop", registry, drive, observe, reset=ledger.reset))
    assert checked > 10
