"""Poll + backoff: failures double the durable delay up to the cap; a success resets it."""

from __future__ import annotations

import pytest

from dormant.testing import TestEnv
from examples import poll_backoff
from examples.poll_backoff import HEALTHY_INTERVAL, MAX_BACKOFF, Services, registry


async def test_backoff_grows_caps_and_resets(monkeypatch: pytest.MonkeyPatch) -> None:
    # Attempts 1-6 fail, 7 succeeds, 8 fails again.
    succeeding = {7}
    seen: list[int] = []

    async def poll(attempt: int) -> bool:
        seen.append(attempt)
        return attempt in succeeding

    monkeypatch.setattr(poll_backoff, "services", Services(poll=poll))
    async with TestEnv(registry) as env:
        poller = env.client.get_or_create("poll-backoff", ["main"])
        await poller.status()  # creates the actor: the first poll runs at once
        await env.run_until_idle()

        delays: list[float] = []
        statuses: list[str] = []
        for _ in range(8):
            deadline = (await poller.status()).waiting_for.deadline
            assert deadline is not None
            delays.append(round(deadline - env.now(), 6))
            statuses.append((await poller.call("get_state")).status)
            await env.advance(delays[-1])  # exactly to the deadline: one poll per sleep

        assert delays == [0.2, 0.4, 0.8, 1.6, 3.2, MAX_BACKOFF, HEALTHY_INTERVAL, 0.2]
        assert statuses == ["retrying"] * 6 + ["healthy", "retrying"]
        assert seen == list(range(1, 10))
        state = await poller.state()
        assert state.attempts == 9
        assert state.backoff == 0.4  # reset by the success, then doubled twice
