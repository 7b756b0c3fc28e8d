"""Simple workflow: three recorded steps; a retry re-runs only the step that failed."""

from __future__ import annotations

from collections import Counter

import pytest

from dormant.testing import TestEnv
from examples import simple_workflow
from examples.simple_workflow import Services, registry


def fake_services(calls: Counter[str], *, tax_failures: int = 0) -> Services:
    async def load_subtotal() -> float:
        calls["load_subtotal"] += 1
        return 250.0

    async def calculate_tax(subtotal: float) -> float:
        calls["calculate_tax"] += 1
        if calls["calculate_tax"] <= tax_failures:
            raise ConnectionError("tax service unavailable")
        return subtotal * 0.1

    async def save_invoice(subtotal: float, tax: float, total: float) -> str:
        calls["save_invoice"] += 1
        calls[f"saved {subtotal} {tax} {total}"] += 1
        return "inv-42"

    return Services(load_subtotal, calculate_tax, save_invoice)


async def test_invoice_is_computed_and_saved(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()
    monkeypatch.setattr(simple_workflow, "services", fake_services(calls))
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("invoice", ["main"])
        await handle.status()  # the first request creates the actor and starts its workflow
        await env.run_until_idle()

        state = await handle.get_state()
        assert (state.invoice_id, state.subtotal, state.tax, state.total, state.status) == (
            "inv-42", 250.0, 25.0, 275.0, "complete")
        assert (await handle.status()).workflow == "completed"
        assert [e.location for e in await handle.history()] == ["load-subtotal", "calculate-tax", "save-invoice"]
        assert calls == Counter(load_subtotal=1, calculate_tax=1, save_invoice=1, **{"saved 250.0 25.0 275.0": 1})


async def test_failed_step_retries_without_rerunning_earlier_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()
    monkeypatch.setattr(simple_workflow, "services", fake_services(calls, tax_failures=2))
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("invoice", ["main"])
        await handle.status()
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow == "sleeping"
        # A retry suspends the actor until its backoff deadline (2 x the 0.1 s base, as in RivetKit); it never
        # runs inline.
        assert status.waiting_for.retry_at == pytest.approx(env.now() + 0.2)
        assert calls["calculate_tax"] == 1

        await env.advance(5)
        assert (await handle.get_state()).total == 275.0
        assert calls["load_subtotal"] == 1  # the recorded subtotal was replayed, not reloaded
        assert calls["calculate_tax"] == 3
        tax_entry = next(e for e in await handle.history() if e.location == "calculate-tax")
        assert tax_entry.attempts == 3


async def test_finished_workflow_is_not_rerun_after_a_redeploy(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()
    monkeypatch.setattr(simple_workflow, "services", fake_services(calls))
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("invoice", ["main"])
        await handle.status()
        await env.run_until_idle()
    async with TestEnv(registry, store=env.store) as again:  # wakes every stored actor once
        await again.run_until_idle()
        handle = again.client.get_or_create("invoice", ["main"])
        assert (await handle.get_state()).invoice_id == "inv-42"
    assert calls["save_invoice"] == 1
