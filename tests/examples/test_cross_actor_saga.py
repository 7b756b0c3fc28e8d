"""Cross-actor saga: happy checkouts complete; a charge that keeps failing releases the
reservation exactly once and leaves the saga failed with the error in its status."""

from __future__ import annotations

import pytest

from dormant import NonRetryableError, StepContext
from dormant.testing import TestEnv
from examples import cross_actor_saga
from examples.cross_actor_saga import Services, registry
from tests.examples.idle import assert_idle_timeout


class FakeGateway:
    def __init__(self, declined: set[str] | None = None) -> None:
        self.declined = declined or set()
        self.unconfirmable: set[str] = set()
        self.attempts: list[str] = []

    async def charge_card(self, order_id: str, amount: int) -> None:
        self.attempts.append(order_id)
        if order_id in self.declined:
            raise RuntimeError(f"card declined for {order_id}")

    async def confirm_order(self, order_id: str) -> None:
        if order_id in self.unconfirmable:
            raise NonRetryableError(f"order service refused {order_id}")


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch) -> FakeGateway:
    fake = FakeGateway()
    monkeypatch.setattr(cross_actor_saga, "services",
                        Services(charge_card=fake.charge_card, confirm_order=fake.confirm_order))
    return fake


async def test_happy_path_counts_orders(gateway: FakeGateway) -> None:
    async with TestEnv(registry) as env:
        saga = env.client.get_or_create("checkout-saga", ["main"])
        await saga.send("orders", {"order_id": "o1", "amount": 30})
        await saga.send("orders", {"order_id": "o2", "amount": 12})
        await env.run_until_idle()

        assert (await saga.call("get_state")).completed_orders == 2
        stock = await env.client.get_or_create("inventory", ["main"]).get_state()
        bills = await env.client.get_or_create("billing", ["main"]).get_state()
        assert stock.reservations == {"reserve-o1": "o1", "reserve-o2": "o2"} and stock.released == []
        assert bills.charges == {"charge-o1": 30, "charge-o2": 12} and bills.refunded == []
        assert gateway.attempts == ["o1", "o2"]
        await assert_idle_timeout(env, saga, "checkout-loop", 30)


async def test_failing_charge_releases_the_reservation_once(gateway: FakeGateway) -> None:
    gateway.declined = {"o2"}
    async with TestEnv(registry) as env:
        saga = env.client.get_or_create("checkout-saga", ["main"])
        await saga.send("orders", {"order_id": "o1", "amount": 30})
        await saga.send("orders", {"order_id": "o2", "amount": 99})
        await env.run_until_idle()
        await env.advance(60)  # the charge's retries back off on the virtual clock

        status = await saga.status()
        assert status.workflow == "failed"
        assert status.error is not None and "card declined for o2" in status.error
        assert gateway.attempts == ["o1"] + ["o2"] * 4  # first attempt + 3 retries

        inventory = env.client.get_or_create("inventory", ["main"])
        stock = await inventory.get_state()
        assert stock.released == ["reserve-o2"]  # compensated exactly once
        assert stock.reservations == {"reserve-o1": "o1"}  # the finished order is left alone
        bills = await env.client.get_or_create("billing", ["main"]).get_state()
        assert bills.charges == {"charge-o1": 30} and bills.refunded == []
        assert (await saga.state()).completed_orders == 1

        reserve = next(e for e in await saga.history() if e.location.endswith("/reserve-inventory")
                       and e.output == "reserve-o2")
        assert reserve.rollback_done
        # Release is idempotent: a repeated compensation changes nothing.
        assert await inventory.release("reserve-o2") is False
        assert (await inventory.get_state()).released == ["reserve-o2"]


async def test_a_failure_after_the_charge_refunds_then_releases(gateway: FakeGateway,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    gateway.unconfirmable = {"o2"}
    calls: list[str] = []
    real_call = cross_actor_saga.call

    async def logged_call(s: StepContext, actor_name: str, action: str, *args: object) -> object:
        calls.append(f"{actor_name}.{action}")
        return await real_call(s, actor_name, action, *args)

    monkeypatch.setattr(cross_actor_saga, "call", logged_call)
    async with TestEnv(registry) as env:
        saga = env.client.get_or_create("checkout-saga", ["main"])
        await saga.send("orders", {"order_id": "o1", "amount": 30})
        await saga.send("orders", {"order_id": "o2", "amount": 99})
        await env.run_until_idle()

        status = await saga.status()
        assert status.workflow == "failed"
        assert status.error is not None and "refused o2" in status.error
        # Newest first, each once: the charge is refunded before the reservation is released.
        assert calls == ["inventory.reserve", "billing.charge"] * 2 + ["billing.refund", "inventory.release"]
        stock = await env.client.get_or_create("inventory", ["main"]).get_state()
        bills = await env.client.get_or_create("billing", ["main"]).get_state()
        assert stock.released == ["reserve-o2"] and stock.reservations == {"reserve-o1": "o1"}
        assert bills.refunded == ["charge-o2"] and bills.charges == {"charge-o1": 30}
        assert (await saga.state()).completed_orders == 1
