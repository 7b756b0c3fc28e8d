"""Race: a bid beats the 24-hour expiry; with no bid the auction expires after exactly 24 hours."""

from __future__ import annotations

import pytest

from dormant.errors import ActorFinishedError
from dormant.testing import TestEnv
from examples import race_auction
from examples.race_auction import Services, registry


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    log: list[str] = []

    async def list_item(item_id: str) -> None:
        log.append(f"list {item_id}")

    async def finalize_auction(item_id: str, outcome: str) -> None:
        log.append(f"finalize {item_id} {outcome}")

    monkeypatch.setattr(race_auction, "services", Services(list_item, finalize_auction))
    return log


async def test_a_bid_wins_the_race(calls: list[str]) -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("auction", ["item-123"])
        await handle.status()
        await env.advance(3600)
        await handle.send("bids", {"amount": 100})
        await env.run_until_idle()

        state = await handle.get_state()
        assert (state.result, state.winning_bid) == ("sold", 100)
        assert calls == ["list item-123", "finalize item-123 sold"]
        status = await handle.status()
        assert (status.workflow, status.output) == ("completed", "sold")
        race = next(e for e in await handle.history() if e.location == "bid-or-expire")
        assert race.winner == "bid"
        assert race.branches["expire"].status == "cancelled"

        await env.advance(24 * 3600)  # the cancelled expiry branch has no effect any more
        assert (await handle.get_state()).result == "sold"
        assert len(calls) == 2


async def test_no_bid_expires_after_24_hours(calls: list[str]) -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("auction", ["item-9"])
        await handle.status()
        await env.run_until_idle()
        status = await handle.status()
        assert status.waiting_for.queues == ["bids"]
        assert status.waiting_for.deadline == env.now() + 24 * 3600  # waits on both branches at once

        await env.advance(24 * 3600 - 1)
        assert (await handle.get_state()).result is None
        await env.advance(1)
        state = await handle.get_state()
        assert (state.result, state.winning_bid) == ("expired", None)
        assert calls == ["list item-9", "finalize item-9 expired"]

        with pytest.raises(ActorFinishedError):  # too late: the workflow is finished and takes no more messages
            await handle.send("bids", {"amount": 50})
        await env.run_until_idle()
        assert (await handle.get_state()).result == "expired"


async def test_the_race_resumes_after_a_redeploy(calls: list[str]) -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("auction", ["item-5"])
        listed_at = env.now()
        await handle.status()
        await env.advance(12 * 3600)
    async with TestEnv(registry, store=env.store) as again:
        handle = again.client.get_or_create("auction", ["item-5"])
        await again.run_until_idle()
        # The expiry deadline is stored, so the redeploy does not restart the 24 hours.
        assert (await handle.status()).waiting_for.deadline == listed_at + 24 * 3600
        await again.advance(12 * 3600 - 1)
        assert (await handle.get_state()).result is None
        await handle.send("bids", {"amount": 7})
        await again.run_until_idle()
        assert (await handle.get_state()).model_dump() == {"result": "sold", "winning_bid": 7}
    assert calls == ["list item-5", "finalize item-5 sold"]
