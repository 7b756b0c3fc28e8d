"""Bounded drain: windows of at most 10 messages, processed at most 3 at a time."""

from __future__ import annotations

import asyncio

import pytest

from dormant.testing import TestEnv
from examples import bounded_drain
from examples.bounded_drain import CONCURRENCY_LIMIT, IDLE_TIMEOUT, TOP_UP_TIMEOUT, Services, registry
from tests.examples.idle import assert_idle_timeout


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
        await env.advance(TOP_UP_TIMEOUT)  # the last window waits 10 ms for a 4th message

        state = await drain.call("get_state")
        assert state.window_sizes == [10, 10, 3]
        assert state.processed == 23
        assert state.last_window_total == 2 * (20 + 21 + 22)
        assert sorted(downstream.values) == list(range(23))
        assert downstream.max_active == CONCURRENCY_LIMIT  # concurrent, and never above the cap


async def test_a_trickle_within_the_top_up_timeout_fills_one_window(downstream: FakeDownstream) -> None:
    async with TestEnv(registry) as env:
        drain = env.client.get_or_create("bounded-drain", ["main"])
        for work_id, value in (("a", 1), ("b", 2), ("c", 3)):  # each arrives within 10 ms of the previous
            await drain.send("work", {"id": work_id, "value": value})
            await env.run_until_idle()
            assert (await drain.state()).window_sizes == []  # still topping the window up
            status = await drain.status()
            assert status.waiting_for.deadline == pytest.approx(env.now() + TOP_UP_TIMEOUT)

        await env.advance(TOP_UP_TIMEOUT)  # nothing more within 10 ms: the window closes with all three
        state = await drain.state()
        assert state.window_sizes == [3]
        assert (state.processed, state.last_window_total) == (3, 12)

        await drain.send("work", {"id": "d", "value": 4})  # a later message opens the next window
        await env.run_until_idle()
        await env.advance(TOP_UP_TIMEOUT)
        assert (await drain.state()).window_sizes == [3, 1]
        await assert_idle_timeout(env, drain, "bounded-drain-loop", IDLE_TIMEOUT)
