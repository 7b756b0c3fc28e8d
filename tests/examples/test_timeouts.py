"""Timeouts: slow attempts are cancelled and retried with backoff; endless slowness exhausts the step.

Step timeouts run on the real clock (they bound real work), so the module's 5 s timeout is shortened
here; backoff waits run on the virtual clock.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from dormant.testing import TestEnv
from examples import timeouts
from examples.timeouts import Services, registry


def slow_then_fast(calls: Counter[str], *, slow_attempts: int) -> Services:
    async def charge_card(order_id: str) -> str:
        calls["attempts"] += 1
        if calls["attempts"] <= slow_attempts:
            try:
                await asyncio.Event().wait()  # a provider that never answers
            except asyncio.CancelledError:
                calls["cancelled"] += 1
                raise
        return f"ch_{order_id}"

    return Services(charge_card)


@pytest.fixture(autouse=True)
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timeouts, "CHARGE_TIMEOUT", 0.05)


async def test_slow_attempts_time_out_then_the_charge_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()
    monkeypatch.setattr(timeouts, "services", slow_then_fast(calls, slow_attempts=2))
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("timeout-charge", ["main"])
        await handle.send("charge", {"order_id": "o-1"})
        await env.run_until_idle()
        status = await handle.status()
        assert calls == Counter(attempts=1, cancelled=1)  # the timed-out attempt was cancelled
        assert status.workflow == "sleeping"
        assert status.waiting_for.retry_at == pytest.approx(env.now() + 0.4)  # first backoff: 2 x base, as RivetKit

        await env.advance(0.4)
        assert calls == Counter(attempts=2, cancelled=2)
        await env.advance(0.8)  # second backoff doubles
        assert calls == Counter(attempts=3, cancelled=2)
        assert (await handle.get_state()).last_charge_id == "ch_o-1"
        step = next(e for e in await handle.history() if e.location.endswith("/charge-card"))
        assert (step.status, step.attempts, step.output) == ("completed", 3, "ch_o-1")


async def test_a_provider_that_never_answers_exhausts_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()
    monkeypatch.setattr(timeouts, "services", slow_then_fast(calls, slow_attempts=1000))
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("timeout-charge", ["main"])
        await handle.send("charge", {"order_id": "o-2"})
        await env.advance(60)  # backoffs 0.4 + 0.8 + 1.6 + 2.0 + 2.0 (capped)

        status = await handle.status()
        assert calls == Counter(attempts=6, cancelled=6)  # 1 attempt + max_retries=5
        assert status.workflow == "failed"
        assert status.error is not None
        assert status.error.startswith('StepExhaustedError: step "charge-card" failed after 6 attempt(s)')
        assert "StepTimeoutError" in status.error
        assert (await handle.get_state()).last_charge_id is None
