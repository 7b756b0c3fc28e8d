"""Batch drainer: buffer metrics in state, flush exactly when 5 are pending."""

from __future__ import annotations

import pytest

from dormant.testing import TestEnv
from examples import batch_drainer
from examples.batch_drainer import IDLE_TIMEOUT, Services, registry
from tests.examples.idle import assert_idle_timeout


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[list[float]]:
    written: list[list[float]] = []

    async def write_batch(values: list[float]) -> None:
        written.append(values)

    monkeypatch.setattr(batch_drainer, "services", Services(write_batch=write_batch))
    return written


async def test_buffers_until_five_then_flushes(batches: list[list[float]]) -> None:
    async with TestEnv(registry) as env:
        drainer = env.client.get_or_create("batch-drainer", ["main"])
        for value in (1, 2, 3, 4):
            await drainer.send("metrics", {"value": value})
        await env.run_until_idle()
        state = await drainer.call("get_state")
        assert state.pending == [1, 2, 3, 4]
        assert state.flushed_batches == 0 and batches == []

        for value in (5, 6, 7):
            await drainer.send("metrics", {"value": value})
        await env.run_until_idle()
        state = await drainer.state()
        assert batches == [[1, 2, 3, 4, 5]]
        assert state.flushed_batches == 1
        assert state.last_batch_total == 15
        assert state.pending == [6, 7]

        # The 5 s idle timeout: with no message an iteration re-checks the buffer and, as in the reference,
        # does not flush a partial batch.
        await assert_idle_timeout(env, drainer, "drain-loop", IDLE_TIMEOUT)
        await env.advance(3 * IDLE_TIMEOUT)
        assert batches == [[1, 2, 3, 4, 5]]
        assert (await drainer.state()).pending == [6, 7]
        checks = [e for e in await drainer.history() if e.location.endswith("/check-full")]
        assert checks and not any(e.output for e in checks)  # idle iterations checked, found it not full

        for value in (8, 9, 10):
            await drainer.send("metrics", {"value": value})
        await env.run_until_idle()
        state = await drainer.state()
        assert batches == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]
        assert state.flushed_batches == 2 and state.last_batch_total == 40 and state.pending == []
