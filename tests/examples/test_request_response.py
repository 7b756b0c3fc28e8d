"""Request/response: send(wait=True) returns the workflow's complete(...) answer, durably by message id."""

from __future__ import annotations

import asyncio

from dormant.testing import TestEnv
from examples.request_response import registry


async def test_send_and_wait_returns_the_response() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("request-response", ["main"])
        result = await handle.send("requests", {"value": 21}, wait=True, timeout=5)
        assert (result.status, result.response) == ("completed", {"doubled": 42})
        assert (await handle.get_state()).handled == 1


async def test_concurrent_callers_each_get_their_own_answer() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("request-response", ["main"])
        results = await asyncio.gather(*(handle.send("requests", {"value": v}, wait=True, timeout=5)
                                         for v in range(1, 6)))
        assert [r.response for r in results] == [{"doubled": 2 * v} for v in range(1, 6)]
        assert (await handle.get_state()).handled == 5


async def test_the_answer_survives_a_restart_and_is_computed_once() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("request-response", ["main"])
        queued = await handle.send("requests", {"value": 8}, message_id="req-1")
        assert queued.status == "queued"
        await env.run_until_idle()

    async with TestEnv(registry, store=env.store) as again:
        handle = again.client.get_or_create("request-response", ["main"])
        result = await handle.send("requests", {"value": 8}, wait=True, timeout=5, message_id="req-1")
        assert (result.status, result.response) == ("completed", {"doubled": 16})
        await again.run_until_idle()
        assert (await handle.get_state()).handled == 1  # the duplicate id was not processed again


async def test_a_resend_of_an_answered_id_reads_its_answer_at_once() -> None:
    """A stored id's answer may be there already: the resend reads it now, without the reply wait's schedule (on
    DynamoDB the first read of a wait comes at the actor type's median answer time)."""
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("request-response", ["main"])
        await handle.send("requests", {"value": 4}, message_id="req-2")
        await env.run_until_idle()

        async def no_wait(*args: object, **kwargs: object) -> None:
            raise AssertionError("a resend of an answered id waited for its answer")

        env.service.await_reply = no_wait  # type: ignore[method-assign]
        result = await handle.send("requests", {"value": 4}, wait=True, timeout=5, message_id="req-2")
        assert (result.status, result.response) == ("completed", {"doubled": 8})
