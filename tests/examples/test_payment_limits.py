"""Flow control across actors: six invoices due at once share the provider's 2 slots and 5 starts a second."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from dormant.cli.render import status_words
from dormant.testing import TestEnv
from examples import payment_limits
from examples.payment_limits import CHARGES_PER_SECOND, CONCURRENT_CHARGES, Provider, registry


async def test_six_invoices_never_charge_more_than_two_at_once_nor_five_a_second(
        monkeypatch: pytest.MonkeyPatch) -> None:
    running = peak = 0
    starts: list[float] = []
    keys: list[str] = []

    async with TestEnv(registry) as env:
        async def charge(invoice: str, cents: int, idempotency_key: str) -> str:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            starts.append(env.now())
            keys.append(idempotency_key)
            await asyncio.sleep(0.05)  # a real call takes time: the others overlap with it if they may
            running -= 1
            return f"ch_{invoice}_{cents}"

        monkeypatch.setattr(payment_limits, "provider", Provider(charge=charge))
        invoices = [env.client.get_or_create("invoice", [f"inv-{n}"]) for n in range(6)]
        for invoice in invoices:
            await invoice.send("bill", {"cents": 1000})
        await env.run_until_idle()

        # The clock has not moved: five charges started in this second (two at a time, each release handing its
        # slot to a waiting invoice); the sixth waits for the next second.
        paid = [(await invoice.state()).paid for invoice in invoices]
        assert paid.count(True) == CHARGES_PER_SECOND
        waiting = invoices[paid.index(False)]
        status = await waiting.status()
        assert status.workflow == "sleeping" and status.waiting_for.limits == ["payments"]
        assert status.waiting_for.deadline is not None and status.waiting_for.deadline > env.now()
        assert "waits for limit [bold]payments[/bold]" in status_words(status, env.now())

        await env.advance(2)
        for invoice in invoices:
            state = await invoice.call("get_state")
            assert state.paid and state.charge_id == f"ch_{invoice.ref.key[0]}_1000"
            assert (await invoice.status()).waiting_for.limits == []

    assert peak == CONCURRENT_CHARGES  # they did overlap, two at a time, never three
    per_second = Counter(int(moment) for moment in starts)
    assert max(per_second.values()) <= CHARGES_PER_SECOND and sum(per_second.values()) == 6
    assert len(set(keys)) == 6  # one charge each: no invoice was charged twice


async def test_a_charge_that_hangs_is_cut_off_at_its_timeout_and_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: Counter[str] = Counter()

    async def charge(invoice: str, cents: int, idempotency_key: str) -> str:
        attempts[invoice] += 1
        if attempts[invoice] == 1:
            await asyncio.Event().wait()  # the provider never answers the first call
        return f"ch_{invoice}_{cents}"

    monkeypatch.setattr(payment_limits, "provider", Provider(charge=charge))
    monkeypatch.setattr(payment_limits, "CHARGE_TIMEOUT", 0.05)  # timeouts bound real work: the real clock
    async with TestEnv(registry) as env:
        invoice = env.client.get_or_create("invoice", ["inv-slow"])
        await invoice.send("bill", {"cents": 500})
        await env.run_until_idle()
        status = await invoice.status()
        assert status.workflow == "sleeping" and status.waiting_for.retry_at is not None  # cut off, retried later
        assert attempts["inv-slow"] == 1

        await env.advance(1)
        state = await invoice.call("get_state")
        assert state.paid and state.charge_id == "ch_inv-slow_500" and attempts["inv-slow"] == 2
        charge_entry = next(e for e in await invoice.history() if e.location == "charge")
        assert (charge_entry.status, charge_entry.attempts) == ("completed", 2)
