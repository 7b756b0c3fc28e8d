"""Setup & teardown (Loop.break_): setup once, process work, break on stop, tear down once."""

from __future__ import annotations

from collections import Counter

import pytest

from dormant.testing import TestEnv
from examples import setup_run_teardown
from examples.setup_run_teardown import Services, registry


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    log: list[str] = []

    async def open_session(pool: str) -> str:
        log.append(f"open {pool}")
        return "sess-7"

    async def process(session_id: str, amount: int) -> int:
        log.append(f"process {session_id} {amount}")
        return amount * 10

    async def close_session(session_id: str) -> None:
        log.append(f"close {session_id}")

    monkeypatch.setattr(setup_run_teardown, "services", Services(open_session, process, close_session))
    return log


async def test_work_until_stop_then_teardown(calls: list[str]) -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("setup-run-teardown", ["main"])
        await handle.send("work", {"amount": 5})  # before the config: it waits for the loop
        await env.run_until_idle()
        assert calls == [] and (await handle.get_state()).phase == "idle"
        await handle.send("config", {"pool": "gpu"})
        await handle.send("work", {"amount": 3})
        await handle.send("control", {"type": "stop", "reason": "maintenance"})
        await handle.send("work", {"amount": 100})  # after the stop: never processed
        await env.run_until_idle()

        state = await handle.get_state()
        assert (state.phase, state.total, state.processed, state.stop_reason) == ("stopped", 80, 2, "maintenance")
        assert calls == ["open gpu", "process sess-7 5", "process sess-7 3", "close sess-7"]
        status = await handle.status()
        assert (status.workflow, status.output) == ("completed", "maintenance")
        loop_entry = next(e for e in await handle.history() if e.location == "worker-loop")
        assert (loop_entry.status, loop_entry.output) == ("completed", "maintenance")


async def test_session_survives_a_redeploy_and_is_opened_once(calls: list[str]) -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("setup-run-teardown", ["main"])
        await handle.send("config", {"pool": "cpu"})
        await handle.send("work", {"amount": 1})
        await env.run_until_idle()
        assert (await handle.get_state()).phase == "running"

    async with TestEnv(registry, store=env.store) as again:
        handle = again.client.get_or_create("setup-run-teardown", ["main"])
        await handle.send("work", {"amount": 2})
        await handle.send("control", {"type": "stop", "reason": "deploy"})
        await again.run_until_idle()
        state = await handle.get_state()
        assert (state.phase, state.total, state.stop_reason) == ("stopped", 30, "deploy")
    assert Counter(call.split()[0] for call in calls) == Counter(open=1, process=2, close=1)


async def test_the_loop_reads_only_work_and_control(calls: list[str]) -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("setup-run-teardown", ["main"])
        await handle.send("config", {"pool": "cpu"})
        await env.run_until_idle()
        await handle.send("config", {"pool": "other"}, message_id="late-config")  # not for the loop
        await handle.send("work", {"amount": 2})
        await handle.send("control", {"type": "stop", "reason": "done"})
        await env.run_until_idle()

        state = await handle.get_state()
        assert (state.phase, state.total, state.processed) == ("stopped", 20, 1)
        assert calls == ["open cpu", "process sess-7 2", "close sess-7"]
        assert env.store.inbox_ids(handle.ref) == ["late-config"]  # left where it was
