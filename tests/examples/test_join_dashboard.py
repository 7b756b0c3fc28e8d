"""Join: three fetches per refresh, combined; a retried branch leaves finished branches alone."""

from __future__ import annotations

from collections import Counter

import pytest

from dormant.testing import TestEnv
from examples import join_dashboard
from examples.join_dashboard import Services, registry


def fake_metrics(calls: Counter[str], *, fail: dict[str, int] | None = None,
                 counts: dict[str, int] | None = None) -> Services:
    failures = dict(fail or {})
    values = counts or {"/users": 3, "/orders": 5, "/revenue": 700}

    async def fetch_count(path: str) -> int:
        calls[path] += 1
        if failures.get(path, 0) > 0:
            failures[path] -= 1
            raise ConnectionError(f"fetch {path} failed: 503")
        return values[path]

    return Services(fetch_count)


async def test_refresh_joins_all_three_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()
    monkeypatch.setattr(join_dashboard, "services", fake_metrics(calls))
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("dashboard", ["main"])
        await handle.send("refresh", {})
        await env.run_until_idle()

        summary = (await handle.get_state()).summary
        assert summary is not None
        assert summary.model_dump() == {"users": 3, "orders": 5, "revenue": 700}
        assert calls == Counter({"/users": 1, "/orders": 1, "/revenue": 1})
        join = next(e for e in await handle.history() if e.kind == "join")
        assert {b: (r.status, r.output) for b, r in join.branches.items()} == {
            "users": ("completed", 3), "orders": ("completed", 5), "revenue": ("completed", 700)}


async def test_a_retried_branch_does_not_refetch_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()
    monkeypatch.setattr(join_dashboard, "services", fake_metrics(calls, fail={"/orders": 2}))
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("dashboard", ["main"])
        await handle.send("refresh", {})
        await env.run_until_idle()
        assert (await handle.get_state()).summary is None  # waiting for the orders retry
        assert (await handle.status()).workflow == "sleeping"

        await env.advance(5)
        summary = (await handle.get_state()).summary
        assert summary is not None and summary.orders == 5
        assert calls == Counter({"/users": 1, "/orders": 3, "/revenue": 1})


async def test_each_refresh_fetches_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()
    counts = {"/users": 1, "/orders": 1, "/revenue": 1}
    monkeypatch.setattr(join_dashboard, "services", fake_metrics(calls, counts=counts))
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("dashboard", ["main"])
        await handle.send("refresh", {})
        await env.run_until_idle()
        counts["/users"] = 2
        await handle.send("refresh", {})
        await env.run_until_idle()
        summary = (await handle.get_state()).summary
        assert summary is not None and summary.users == 2
        assert calls["/users"] == 2


async def test_a_branch_that_keeps_failing_fails_the_join(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()
    monkeypatch.setattr(join_dashboard, "services", fake_metrics(calls, fail={"/revenue": 100}))
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("dashboard", ["main"])
        await handle.send("refresh", {})
        await env.advance(60)

        status = await handle.status()
        assert status.workflow == "failed"
        assert status.error is not None and status.error.startswith("JoinError")
        assert "revenue" in status.error and "users" not in status.error
        assert calls == Counter({"/users": 1, "/orders": 1, "/revenue": 4})  # 1 attempt + 3 retries
