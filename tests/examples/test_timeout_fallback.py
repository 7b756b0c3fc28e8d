"""Timeout + fallback: a fast primary wins the race; a primary slower than the timer loses when the timer
fires, while its call is still running (the call is cancelled), and the fallback actor answers."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from dormant.testing import TestEnv
from examples import timeout_fallback
from examples.timeout_fallback import FALLBACK_AFTER, Services, registry


class FakeBackends:
    """`primary_delay`: seconds of real time the primary takes (None: it never answers)."""

    def __init__(self, primary_delay: float | None = 0.0, primary_fails: bool = False) -> None:
        self.primary_delay = primary_delay
        self.primary_fails = primary_fails
        self.calls: Counter[str] = Counter()
        self.started = asyncio.Event()

    async def primary_value(self) -> str:
        self.calls["primary"] += 1
        self.started.set()
        if self.primary_fails:
            raise RuntimeError("primary unavailable")
        try:
            if self.primary_delay is None:
                await asyncio.Event().wait()
            else:
                await asyncio.sleep(self.primary_delay)
        except asyncio.CancelledError:
            self.calls["primary cancelled"] += 1
            raise
        return "from-primary"

    async def fallback_value(self) -> str:
        self.calls["fallback"] += 1
        return "from-fallback"


def install(monkeypatch: pytest.MonkeyPatch, fake: FakeBackends) -> None:
    monkeypatch.setattr(timeout_fallback, "services",
                        Services(primary_value=fake.primary_value, fallback_value=fake.fallback_value))


async def race_entry(handle: Any) -> Any:
    return next(e for e in await handle.history() if e.kind.value == "race")


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
        race = await race_entry(chooser)
        assert race.winner == "primary"
        assert race.branches["timeout"].status.value == "cancelled"
        # The idle wait for the next request has its 30 s timeout.
        assert (await chooser.status()).waiting_for.deadline == pytest.approx(env.now() + 30)


@pytest.mark.parametrize("primary_delay", [0.5, None], ids=["slow-primary", "hung-primary"])
async def test_primary_slower_than_the_timer_loses_at_the_timer(monkeypatch: pytest.MonkeyPatch,
                                                                  primary_delay: float | None) -> None:
    fake = FakeBackends(primary_delay=primary_delay)
    install(monkeypatch, fake)
    async with TestEnv(registry) as env:
        chooser = env.client.get_or_create("timeout-fallback", ["main"])
        await chooser.send("requests", {})
        async with env.running():
            await fake.started.wait()  # the primary call is in flight
        env.clock.advance(FALLBACK_AFTER)  # the timer's 200 ms pass while the primary still works
        await env.run_until_idle()

        state = await chooser.state()
        assert (state.last_source, state.last_value) == ("fallback", "from-fallback")
        assert fake.calls == Counter({"primary": 1, "primary cancelled": 1, "fallback": 1})
        race = await race_entry(chooser)
        assert race.winner == "timeout"
        assert race.branches["primary"].status.value == "cancelled"
        call = next(e for e in await chooser.history() if e.location.endswith("/primary/call-primary"))
        assert (call.status.value, call.attempts) == ("cancelled", 1)
        assert call.error is not None and call.error.type == "StepCancelled"

    async with TestEnv(registry, store=env.store) as again:  # a redeploy replays the recorded winner
        await again.run_until_idle()
        handle = again.client.get_or_create("timeout-fallback", ["main"])
        assert (await handle.state()).last_source == "fallback"
    assert fake.calls == Counter({"primary": 1, "primary cancelled": 1, "fallback": 1})


async def test_failing_primary_is_retried_until_the_timer_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeBackends(primary_fails=True)
    install(monkeypatch, fake)
    async with TestEnv(registry) as env:
        chooser = env.client.get_or_create("timeout-fallback", ["main"])
        await chooser.send("requests", {})
        await env.run_until_idle()
        status = await chooser.status()
        assert status.workflow == "sleeping"  # the primary's retry and the timer: both due in 200 ms
        assert status.waiting_for.deadline == pytest.approx(env.now() + FALLBACK_AFTER)
        assert (await chooser.state()).last_source == "none"

        await env.advance(FALLBACK_AFTER)
        state = await chooser.state()
        assert (state.last_source, state.last_value) == ("fallback", "from-fallback")
        assert fake.calls["fallback"] == 1 and fake.calls["primary"] >= 1
        race = await race_entry(chooser)
        assert race.winner == "timeout"
