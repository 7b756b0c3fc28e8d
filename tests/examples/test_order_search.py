"""Orders found by the search attributes their steps set: equality, ranges, several conditions, a status filter,
counts per status and pages, in memory and on the AWS stack (DynamoDB Local's `search` index)."""

from __future__ import annotations

from datetime import UTC, datetime

from dormant.testing import TestEnv
from examples.order_search import registry


async def keys(env: TestEnv, *where: str, status: str | None = None) -> list[str]:
    return [summary.key[0] async for summary in env.client.actors("shop-order", where=list(where), status=status)]


async def test_an_operator_finds_orders_by_what_their_steps_set() -> None:
    async with TestEnv(registry) as env:
        start = datetime.fromtimestamp(env.now(), UTC)
        orders = {"o-1": ("42", 12_500), "o-2": ("42", 4_000), "o-3": ("7", 30_000), "o-4": ("42", 10_000)}
        for key, (customer, amount) in orders.items():
            await env.client.get_or_create("shop-order", key).send("place", {"customer": customer, "amount": amount})
        await env.run_until_idle()

        assert await keys(env, "customer=42", "amount>10000") == ["o-1"]
        assert await keys(env, "amount>=10000") == ["o-4", "o-1", "o-3"]  # in amount order
        assert sorted(await keys(env, "express=true")) == ["o-1", "o-3", "o-4"]
        assert sorted(await keys(env, "customer=42", "stage=accepted")) == ["o-1", "o-2", "o-4"]
        assert await keys(env, f"placed_at>={start.isoformat()}", "amount<5000") == ["o-2"]

        await env.client.get_or_create("shop-order", "o-3").send("ship", {"carrier": "ups"})
        await env.client.get_or_create("shop-order", "o-4").call("hold")
        await env.run_until_idle()
        assert await keys(env, "stage=shipped") == ["o-3"] and await keys(env, "stage=held") == ["o-4"]
        assert await keys(env, "stage=shipped", status="completed") == ["o-3"]
        assert await keys(env, "amount>=0", status="completed") == ["o-3"]

        counts = await env.client.counts("shop-order", where=["customer^=4"])
        assert (counts.counts["sleeping"].count, counts.counts["completed"].count) == (3, 0)
        counts = await env.client.counts("shop-order", where=["amount>=0"])
        assert (counts.counts["sleeping"].count, counts.counts["completed"].count) == (3, 1)
        assert all(found.exact for found in counts.counts.values())

        page = await env.client.list_actors("shop-order", where=["amount>=0"], limit=2)
        assert [s.key[0] for s in page.actors] == ["o-2", "o-4"] and page.cursor is not None
        assert page.actors[0].attributes == {"amount": 4_000, "customer": "42", "express": False,
                                             "placed_at": start.isoformat(timespec="microseconds"),
                                             "stage": "accepted"}
        rest = await env.client.list_actors("shop-order", where=["amount>=0"], limit=2, cursor=page.cursor)
        assert [s.key[0] for s in rest.actors] == ["o-1", "o-3"]

        status = await env.client.get_or_create("shop-order", "o-3").status()
        assert status.search["stage"] == "shipped" and status.search["customer"] == "7"


async def test_each_wait_takes_only_its_own_queue() -> None:
    """A shipping notice that arrives before its order waits for it; a second placement is not taken for the
    shipping notice (each wait names its queue)."""
    async with TestEnv(registry) as env:
        early = env.client.get_or_create("shop-order", "early-notice")
        await early.send("ship", {"carrier": "dhl"})
        await early.send("place", {"customer": "5", "amount": 700})
        twice = env.client.get_or_create("shop-order", "placed-twice")
        await twice.send("place", {"customer": "6", "amount": 800})
        await twice.send("place", {"customer": "6", "amount": 900})
        await twice.send("ship", {"carrier": "ups"})
        await env.run_until_idle()

        for handle, customer, amount, carrier in ((early, "5", 700, "dhl"), (twice, "6", 800, "ups")):
            status = await handle.status()
            assert (status.workflow, status.output) == ("completed", carrier), status
            state = await handle.state()
            assert (state.customer, state.amount, state.carrier) == (customer, amount, carrier)
