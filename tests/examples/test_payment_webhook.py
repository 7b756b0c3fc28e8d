"""Payment webhook: the provider completes the workflow's callback through POST /callbacks/{token} (memory and AWS)."""

from __future__ import annotations

import httpx
import pytest

from dormant import CallbackCompletedError, CallbackExpiredError, InvalidMessageError
from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from examples import payment_webhook
from examples.payment_webhook import PAYMENT_TIMEOUT, Services, registry

PAID = {"status": "paid", "amount_cents": 4200, "reference": "pay_1"}


@pytest.fixture
def webhooks(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """order id -> the webhook URL the provider was given."""
    given: dict[str, str] = {}

    async def create_payment(order_id: str, amount_cents: int, webhook_url: str, idempotency_key: str) -> str:
        given[order_id] = webhook_url
        return f"chk_{order_id}"

    monkeypatch.setattr(payment_webhook, "services", Services(create_payment=create_payment))
    return given


async def _ordered(env: TestEnv, order_id: str, webhooks: dict[str, str], amount: int = 4200) -> str:
    handle = env.client.get_or_create("payment-checkout", [order_id])
    await handle.send("order", {"amount_cents": amount})
    await env.run_until_idle()
    assert (await handle.state()).status == "awaiting_payment"
    status = await handle.status()
    assert status.workflow == "sleeping"
    assert [(c.name, c.deadline) for c in status.waiting_for.callbacks] == [("payment", env.now() + PAYMENT_TIMEOUT)]
    url = webhooks[order_id]
    assert url.startswith("https://dormant.test/callbacks/dcb_")
    return url.rsplit("/", 1)[1]


async def test_the_providers_webhook_post_resumes_the_waiting_workflow(webhooks: dict[str, str]) -> None:
    async with TestEnv(registry) as env:
        token = await _ordered(env, "order-1", webhooks)
        # The real app, in iam mode with no identity at all: the callback route asks for nothing but the token.
        app = create_app(registry, Settings(auth_mode="iam"), service=env.service)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as provider:
            response = await provider.post(f"/callbacks/{token}", json={"result": PAID})
            assert (response.status_code, response.json()["status"]) == (202, "accepted")
            await env.run_until_idle()
            again = await provider.post(f"/callbacks/{token}", json={"result": PAID})  # the provider retries
            assert (again.status_code, again.json()["status"]) == (200, "completed")
            other = await provider.post(f"/callbacks/{token}", json={"result": {**PAID, "reference": "pay_2"}})
            assert (other.status_code, other.json()["error"]["code"]) == (409, "callback_completed")
            assert token not in other.text
        handle = env.client.get_or_create("payment-checkout", ["order-1"])
        state = await handle.state()
        assert (state.status, state.reference, state.checkout_id) == ("paid", "pay_1", "chk_order-1")
        status = await handle.status()
        assert (status.workflow, status.output, status.waiting_for.callbacks) == ("completed", "paid", [])


async def test_a_declined_payment_fails_the_callback(webhooks: dict[str, str]) -> None:
    async with TestEnv(registry) as env:
        token = await _ordered(env, "order-2", webhooks)
        result = await env.client.fail_callback(token, "CardDeclined", "insufficient funds")
        assert result.status == "accepted"
        await env.run_until_idle()
        state = await env.client.get_or_create("payment-checkout", ["order-2"]).state()
        assert (state.status, state.reason) == ("declined", "CardDeclined: insufficient funds")
        with pytest.raises(CallbackCompletedError):
            await env.client.complete_callback(token, PAID)


async def test_no_payment_within_a_day_expires_the_order(webhooks: dict[str, str]) -> None:
    async with TestEnv(registry) as env:
        token = await _ordered(env, "order-3", webhooks)
        await env.advance(PAYMENT_TIMEOUT)
        handle = env.client.get_or_create("payment-checkout", ["order-3"])
        assert (await handle.state()).status == "expired"
        with pytest.raises(CallbackExpiredError):
            await env.client.complete_callback(token, PAID)
        assert (await env.client.callback_status(token)).status == "timed_out"


async def test_a_result_that_does_not_fit_is_refused_and_a_good_one_still_lands(webhooks: dict[str, str]) -> None:
    async with TestEnv(registry) as env:
        token = await _ordered(env, "order-4", webhooks)
        with pytest.raises(InvalidMessageError, match="amount_cents"):
            await env.client.complete_callback(token, {**PAID, "amount_cents": -1})
        await env.run_until_idle()
        handle = env.client.get_or_create("payment-checkout", ["order-4"])
        assert (await handle.state()).status == "awaiting_payment"
        await env.client.complete_callback(token, {**PAID, "amount_cents": 4000})
        await env.run_until_idle()
        state = await handle.state()
        assert (state.status, state.reason) == ("amount_mismatch", "paid 4000 cents of 4200")
