"""Crash safety of callbacks: every storage call of every wake-up and of every callback request fails in turn
(before it applies, and after it applied but before the caller heard back), and the outcome never changes: the
token handed out is the one recorded, the completion is taken exactly once, a heartbeat's move is never lost."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from dormant import CallbackError, StepContext, WorkflowContext, actor, callback, setup
from dormant.testing import TestEnv
from dormant.workflow.callbacks import MESSAGE_PREFIX
from examples import payment_webhook
from examples.payment_webhook import Services
from tests.crash.harness import Observation, Scenario, check_crash_safety

Retry = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]
WEBHOOKS: dict[str, list[str]] = {}  # order id -> every webhook URL the provider was given (re-run steps too)


async def _create_payment(order_id: str, amount_cents: int, webhook_url: str, idempotency_key: str) -> str:
    WEBHOOKS.setdefault(order_id, []).append(webhook_url)
    return f"chk_{idempotency_key[:8]}"


@pytest.fixture(autouse=True)
def _provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(payment_webhook, "services", Services(create_payment=_create_payment))


async def drive_payment(env: TestEnv, retry: Retry) -> None:
    order = env.client.get_or_create("payment-checkout", ["order-1"])
    await retry(lambda: order.send("order", {"amount_cents": 4200}, message_id="order-1"))
    await env.run_until_idle()
    urls = set(WEBHOOKS["order-1"])
    assert len(urls) == 1, urls  # a re-run step hands out the same (recorded) token
    token = urls.pop().rsplit("/", 1)[1]
    await retry(lambda: env.client.complete_callback(token, {"status": "paid", "amount_cents": 4200,
                                                             "reference": "pay_1"}))
    await env.run_until_idle()
    await retry(lambda: env.client.complete_callback(token, {"status": "paid", "amount_cents": 4200,
                                                             "reference": "pay_1"}))  # the provider retries


async def observe_payment(env: TestEnv) -> Observation:
    handle = env.client.get_or_create("payment-checkout", ["order-1"])
    token = WEBHOOKS["order-1"][0].rsplit("/", 1)[1]
    state = (await handle.state()).model_dump(mode="json")
    return {"state": state, "workflow": (await handle.status()).workflow.value,
            "callback": (await env.client.callback_status(token)).status}


class Beats(BaseModel):
    token: str = ""
    outcome: str = ""


beating = actor("crash-beats", state=Beats, callbacks={"done": callback()})


@beating.workflow
async def beating_run(ctx: WorkflowContext) -> None:
    cb = await ctx.callback("done", timeout=1000, heartbeat_timeout=100)

    def hand_out(s: StepContext) -> None:
        s.state.token = cb.token

    await ctx.step("hand-out", hand_out)
    try:
        outcome = f"result {await cb.result()}"
    except CallbackError as error:
        outcome = type(error).__name__

    def record(s: StepContext) -> None:
        s.state.outcome = outcome

    await ctx.step("record", record)


async def drive_beats(env: TestEnv, retry: Retry) -> None:
    handle = env.client.get_or_create("crash-beats", ["k"])
    await retry(handle.status)
    await env.run_until_idle()
    token = (await retry(handle.state)).token
    await env.advance(60)
    await retry(lambda: env.client.heartbeat_callback(token))  # to 160: the wake-up at 100 must see it
    await env.advance(60)
    await retry(lambda: env.client.heartbeat_callback(token))  # to 220
    await env.advance(60)
    await retry(lambda: env.client.complete_callback(token, "done at 180"))
    await env.run_until_idle()


async def observe_beats(env: TestEnv) -> Observation:
    handle = env.client.get_or_create("crash-beats", ["k"])
    return {"outcome": (await handle.state()).outcome, "workflow": (await handle.status()).workflow.value}


def _reset() -> None:
    WEBHOOKS.clear()


def _completion(message_id: str) -> str:
    return "the callback's completion" if message_id.startswith(MESSAGE_PREFIX) else message_id


@pytest.mark.parametrize("scenario", [
    Scenario("payment webhook", payment_webhook.registry, drive_payment, observe_payment, reset=_reset,
             message_key=_completion),
    Scenario("heartbeats", setup(beating), drive_beats, observe_beats, message_key=_completion),
], ids=lambda scenario: scenario.name)
async def test_callbacks_survive_a_crash_between_any_two_storage_calls(scenario: Scenario) -> None:
    checked = await check_crash_safety(scenario)
    assert checked >= 20
