"""Queue: commands on two queues are applied in send order; bad sends fail loudly and store nothing."""

from __future__ import annotations

import pytest

from dormant import InvalidMessageError, UnknownQueueError
from dormant.testing import TestEnv
from examples.queue_commands import registry


async def test_commands_from_both_queues_apply_in_send_order() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("command-queue", ["cart-1"])
        results = [await handle.send("add", {"sku": "apple", "quantity": 2}),
                   await handle.send("add", {"sku": "pear", "quantity": 1}),
                   await handle.send("remove", {"sku": "apple"}),
                   await handle.send("add", {"sku": "apple", "quantity": 5})]
        assert {r.status for r in results} == {"queued"}  # fire and forget: no reply awaited
        await env.run_until_idle()

        state = await handle.get_state()
        assert state.applied == ["add apple 2", "add pear 1", "remove apple", "add apple 5"]
        assert state.items == {"pear": 1, "apple": 5}
        assert env.store.inbox_ids(handle.ref) == []  # every message consumed exactly once


async def test_a_resent_message_id_is_applied_once() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("command-queue", ["cart-1"])
        for _ in range(3):  # e.g. a client retrying after a lost response
            await handle.send("add", {"sku": "fig", "quantity": 1}, message_id="cmd-1")
        await env.run_until_idle()
        assert (await handle.get_state()).items == {"fig": 1}


async def test_bad_sends_raise_and_store_nothing() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("command-queue", ["cart-1"])
        await handle.send("add", {"sku": "kiwi", "quantity": 1})
        await env.run_until_idle()
        version = (await handle.status()).version

        with pytest.raises(UnknownQueueError, match=r"no queue of that name; declared queues: \['add', 'remove'\]"):
            await handle.send("clear", {})
        with pytest.raises(UnknownQueueError):
            await handle.send("Add", {"sku": "kiwi", "quantity": 1})  # queue names are exact
        with pytest.raises(InvalidMessageError, match='queue "add" body is invalid'):
            await handle.send("add", {"sku": "apple", "quantity": 0})
        with pytest.raises(InvalidMessageError):
            await handle.send("remove", {"name": "kiwi"})
        await env.run_until_idle()

        assert env.store.inbox_ids(handle.ref) == []
        assert (await handle.status()).version == version  # nothing was committed
        assert (await handle.get_state()).applied == ["add kiwi 1"]
