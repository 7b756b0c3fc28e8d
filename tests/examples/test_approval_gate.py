"""Human approval gate: the workflow parks on the approval queue, then fulfils or cancels."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from dormant.testing import TestEnv
from examples import approval_gate
from examples.approval_gate import Services, registry


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    log: list[tuple[str, str]] = []

    def recorder(kind: str) -> Callable[[str], Awaitable[None]]:
        async def call(order_id: str) -> None:
            log.append((kind, order_id))
        return call

    monkeypatch.setattr(approval_gate, "services",
                        Services(validate_order=recorder("validate"), fulfill_order=recorder("fulfill"),
                                 cancel_order=recorder("cancel")))
    return log


async def test_waits_for_the_decision_then_fulfils(calls: list[tuple[str, str]]) -> None:
    async with TestEnv(registry) as env:
        order = env.client.get_or_create("approval-gate", ["order-123"])
        await order.status()  # the first request creates the actor and starts its workflow
        await env.run_until_idle()

        status = await order.status()
        assert status.workflow == "sleeping"
        assert status.waiting_for.queues == ["approval"]
        assert (await order.call("get_state")).status == "awaiting_approval"
        assert calls == [("validate", "order-123")]

        await order.send("approval", {"approved": True})
        await env.run_until_idle()

        assert (await order.state()).status == "fulfilled"
        assert calls == [("validate", "order-123"), ("fulfill", "order-123")]
        status = await order.status()
        assert status.workflow == "completed"
        assert status.output == "fulfilled"


async def test_rejection_cancels_the_order(calls: list[tuple[str, str]]) -> None:
    async with TestEnv(registry) as env:
        order = env.client.get_or_create("approval-gate", ["order-7"])
        await order.send("approval", {"approved": False})  # a decision sent early waits in the inbox
        await env.run_until_idle()

        assert (await order.state()).status == "cancelled"
        assert calls == [("validate", "order-7"), ("cancel", "order-7")]
        assert (await order.status()).output == "cancelled"
        kinds = [(e.location, e.kind.value) for e in await order.history()]
        assert ("cancel-order", "step") in kinds and ("fulfill-order", "step") not in kinds
