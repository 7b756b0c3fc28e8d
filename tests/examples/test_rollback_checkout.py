"""Rollback: a declined charge releases the reservation exactly once; the happy path confirms."""

from __future__ import annotations

import pytest

from dormant import NonRetryableError
from dormant.testing import TestEnv
from examples import rollback_checkout
from examples.rollback_checkout import Services, registry


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    log: list[str] = []

    async def reserve_inventory(order_id: str) -> str:
        log.append(f"reserve {order_id}")
        return f"res-{order_id}"

    async def release_inventory(reservation_id: str) -> None:
        log.append(f"release {reservation_id}")

    async def charge_card(order_id: str) -> str:
        log.append(f"charge {order_id}")
        if order_id.startswith("declined"):
            raise NonRetryableError("card declined")
        return f"ch-{order_id}"

    async def refund_charge(charge_id: str) -> None:
        log.append(f"refund {charge_id}")

    async def confirm_order(order_id: str) -> None:
        log.append(f"confirm {order_id}")
        if order_id.startswith("unconfirmable"):
            raise NonRetryableError("the order service refused the order")

    monkeypatch.setattr(rollback_checkout, "services",
                        Services(reserve_inventory, release_inventory, charge_card, refund_charge, confirm_order))
    return log


async def test_happy_path_confirms(calls: list[str]) -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("checkout", ["shop"])
        await handle.send("orders", {"order_id": "o1"})
        await env.run_until_idle()

        state = await handle.get_state()
        assert (state.status, state.confirmed) == ("confirmed", ["o1"])
        assert calls == ["reserve o1", "charge o1", "confirm o1"]
        assert (await handle.status()).workflow == "sleeping"  # ready for the next order


async def test_declined_charge_releases_the_reservation_once(calls: list[str]) -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("checkout", ["shop"])
        await handle.send("orders", {"order_id": "o1"})
        await handle.send("orders", {"order_id": "declined-2"})
        await env.run_until_idle()

        # Only the failing order's completed step is compensated; o1 (an earlier iteration) is kept.
        assert calls == ["reserve o1", "charge o1", "confirm o1", "reserve declined-2", "charge declined-2",
                         "release res-declined-2"]
        status = await handle.status()
        assert status.workflow == "failed"
        assert status.error is not None and "card declined" in status.error
        state = await handle.get_state()
        assert state.confirmed == ["o1"]
        reserve = next(e for e in await handle.history()
                       if e.location.endswith("/reserve-inventory") and e.output == "res-declined-2")
        assert reserve.rollback_done

    async with TestEnv(registry, store=env.store) as again:  # later wake-ups do not compensate again
        await again.advance(3600)
        handle = again.client.get_or_create("checkout", ["shop"])
        assert (await handle.status()).workflow == "failed"
    assert calls.count("release res-declined-2") == 1
    assert not any(call.startswith("refund") for call in calls)


async def test_a_failure_after_the_charge_refunds_then_releases_newest_first(calls: list[str]) -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("checkout", ["shop"])
        await handle.send("orders", {"order_id": "o1"})
        await handle.send("orders", {"order_id": "unconfirmable-2"})
        await env.run_until_idle()

        order = "unconfirmable-2"
        assert calls == ["reserve o1", "charge o1", "confirm o1", f"reserve {order}", f"charge {order}",
                         f"confirm {order}", f"refund ch-{order}", f"release res-{order}"]
        status = await handle.status()
        assert status.workflow == "failed"
        assert status.error is not None and "refused the order" in status.error
        assert (await handle.get_state()).confirmed == ["o1"]
        done = {e.location.rsplit("/", 1)[-1]: e.rollback_done for e in await handle.history()
                if e.output in (f"res-{order}", f"ch-{order}")}
        assert done == {"reserve-inventory": True, "charge-card": True}

    async with TestEnv(registry, store=env.store) as again:  # compensation ran exactly once
        await again.advance(3600)
    assert calls.count(f"refund ch-{order}") == 1 and calls.count(f"release res-{order}") == 1
