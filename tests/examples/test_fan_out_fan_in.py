"""Fan-out / fan-in: three parallel fetches merged; a branch that keeps failing surfaces as JoinError."""

from __future__ import annotations

from collections import Counter

import pytest

from dormant.testing import TestEnv
from examples import fan_out_fan_in
from examples.fan_out_fan_in import Services, registry
from tests.examples.idle import assert_idle_timeout

COUNTS = {"/users": 10, "/orders": 20, "/invoices": 30}


class FakeApi:
    def __init__(self, failing: set[str] | None = None) -> None:
        self.calls: Counter[str] = Counter()
        self.failing = failing or set()

    async def fetch_count(self, path: str) -> int:
        self.calls[path] += 1
        if path in self.failing:
            raise RuntimeError(f"{path} is down")
        return COUNTS[path]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    fake = FakeApi()
    monkeypatch.setattr(fan_out_fan_in, "services", Services(fetch_count=fake.fetch_count))
    return fake


async def test_join_merges_the_three_branches(api: FakeApi) -> None:
    async with TestEnv(registry) as env:
        dashboard = env.client.get_or_create("fan-out-fan-in", ["main"])
        await dashboard.send("refresh", {})
        await env.run_until_idle()

        state = await dashboard.call("get_state")
        assert state.total == 60
        assert state.refreshes == 1
        assert api.calls == Counter({"/users": 1, "/orders": 1, "/invoices": 1})
        join = next(e for e in await dashboard.history() if e.kind.value == "join")
        assert sorted(join.branches) == ["invoices", "orders", "users"]
        assert {b: r.output for b, r in join.branches.items()} == {"users": 10, "orders": 20, "invoices": 30}
        await assert_idle_timeout(env, dashboard, "join-loop", 30)


async def test_a_branch_failing_after_retries_raises_join_error(api: FakeApi) -> None:
    api.failing = {"/orders"}
    async with TestEnv(registry) as env:
        dashboard = env.client.get_or_create("fan-out-fan-in", ["main"])
        await dashboard.send("refresh", {})
        await env.run_until_idle()
        assert api.calls["/orders"] == 1  # retries wait for their (virtual) backoff time
        await env.advance(5)

        state = await dashboard.state()
        assert list(state.last_errors) == ["orders"]
        assert "/orders is down" in state.last_errors["orders"]
        assert "4 attempt(s)" in state.last_errors["orders"]
        assert state.total == 0 and state.refreshes == 0
        # 1 attempt + 3 retries for the failing branch; the others ran once and were not re-run.
        assert api.calls == Counter({"/users": 1, "/orders": 4, "/invoices": 1})
        assert (await dashboard.status()).workflow == "sleeping"  # caught: the loop goes on

        api.failing = set()
        await dashboard.send("refresh", {})
        await env.run_until_idle()
        state = await dashboard.state()
        assert state.total == 60 and state.last_errors == {}
