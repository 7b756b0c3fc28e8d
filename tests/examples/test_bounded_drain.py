"""Bounded drain: windows of at most 10 messages, processed at most 3 at a time."""

from __future__ import annotations

import asyncio

import pytest

from dormant.testing import TestEnv
from examples import bounded_drain
from examples.bounded_drain import CONCURRENCY_LIMIT, TOP_UP_TIMEOUT, Services, registry


class FakeDownstream:
    def __init__(self) -> None:
        self.active = 0
        self.max_active = 0
        self.values: list[int] = []

    async def process_work(self, value: int) -> int:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        for _ in range(3):
            await asyncio.sleep(0)  # let the other workers of the window run meanwhile
        self.values.append(value)
        self.active -= 1
        return value * 2


@pytest.fixture
def downstream(monkeypatch: pytest.MonkeyPatch) -> FakeDownstream:
    fake = FakeDownstream()
    monkeypatch.setattr(bounded_drain, "services", Services(process_work=fake.process_work))
    return fake


async def test_backlog_is_drained_in_bounded_windows(downstream: FakeDownstream) -> None:
    async with TestEnv(registry) as env:
        drain = env.client.get_or_create("bounded-drain", ["main"])
        for i in range(23):
            await drain.send("work", {"id": f"w{i}", "value": i})
        await env.run_until_idle()

        state = await drain.call("get_state")
        assert state.window_sizes == [10, 10, 3]
        assert state.processed == 23
        assert state.last_window_total == 2 * (20 + 21 + 22)
        assert sorted(downstream.values) == list(range(23))
        assert downstream.max_active == CONCURRENCY_LIMIT  # concurrent, and never above the cap


async def test_window_is_topped_up_until_the_short_timeout(downstream: FakeDownstream) -> None:
    async with TestEnv(registry) as env:
        drain = env.client.get_or_create("bounded-drain", ["main"])
        await drain.send("work", {"id": "a", "value": 1})
        await env.run_until_idle()
        assert (await drain.state()).window_sizes == []  # waiting to top the window up
        status = await drain.status()
        assert status.waiting_for.deadline == pytest.approx(env.now() + TOP_UP_TIMEOUT)

        await drain.send("work", {"id": "b", "value": 2})  # arrives in time: same window
        await env.run_until_idle()
        assert (await drain.state()).window_sizes == [2]

        await drain.send("work", {"id": "c", "value": 3})
        await env.advance(TOP_UP_TIMEOUT)  # nothing more: the window closes with one message
        state = await drain.state()
        assert state.window_sizes == [2, 1]
        assert (state.processed, state.last_window_total) == (3, 6)
