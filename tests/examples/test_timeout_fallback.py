"""Timeout + fallback: a fast primary wins the race; a hung primary times out and the timer
branch hands the request to the fallback actor."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from dormant.testing import TestEnv
from examples import timeout_fallback
from examples.timeout_fallback import FALLBACK_AFTER, Services, registry

HUNG_TEST_TIMEOUT = 0.5  # the hung-primary test shortens the step timeout so it runs fast


class FakeBackends:
    def __init__(self, primary_delay: float = 0.0) -> None:
        self.primary_delay = primary_delay
        self.calls: Counter[str] = Counter()

    async def primary_value(self) -> str:
        self.calls["primary"] += 1
        await asyncio.sleep(self.primary_delay)  # real time: this is what the step timeout measures
        return "from-primary"

    async def fallback_value(self) -> str:
        self.calls["fallback"] += 1
        return "from-fallback"


def install(monkeypatch: pytest.MonkeyPatch, fake: FakeBackends) -> None:
    monkeypatch.setattr(timeout_fallback, "services",
                        Services(primary_value=fake.primary_value, fallback_value=fake.fallback_value))


async def test_fast_primary_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeBackends()
    install(monkeypatch, fake)
    async with TestEnv(registry) as env:
        chooser = env.client.get_or_create("timeout-fallback", ["main"])
        await chooser.send("requests", {})
        await env.run_until_idle()

        state = await chooser.call("get_state")
        assert (state.last_source, state.last_value) == ("primary", "from-primary")
        assert fake.calls == Counter({"primary": 1})
        race = next(e for e in await chooser.history() if e.kind.value == "race")
        assert race.winner == "primary"
        assert race.branches["timeout"].status.value == "cancelled"


async def test_hung_primary_falls_back_when_the_timer_fires(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timeout_fallback, "PRIMARY_STEP_TIMEOUT", HUNG_TEST_TIMEOUT)
    fake = FakeBackends(primary_delay=HUNG_TEST_TIMEOUT * 10)
    install(monkeypatch, fake)
    async with TestEnv(registry) as env:
        chooser = env.client.get_or_create("timeout-fallback", ["main"])
        await chooser.send("requests", {})
        await env.run_until_idle()

        # The primary branch failed (step timeout, no retries); the race waits for its timer.
        status = await chooser.status()
        assert status.workflow == "sleeping"
        assert status.waiting_for.deadline == pytest.approx(env.now() + FALLBACK_AFTER)
        assert (await chooser.state()).last_source == "none"

        await env.advance(FALLBACK_AFTER)
        state = await chooser.state()
        assert (state.last_source, state.last_value) == ("fallback", "from-fallback")
        # On the AWS backends the call reaches the primary through DynamoDB: on a slow machine the step may
        # time out before it got there. Either way the primary never answered and the fallback answered once.
        assert fake.calls["fallback"] == 1 and fake.calls["primary"] <= 1
        race = next(e for e in await chooser.history() if e.kind.value == "race")
        assert race.winner == "timeout"
        primary = race.branches["primary"]
        assert primary.status.value == "failed" and primary.error is not None
        assert "timed out" in primary.error.message
