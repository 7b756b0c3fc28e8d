"""Async RPC over a completable queue: actor-to-actor and client-to-actor request/response."""

from __future__ import annotations

from dormant.testing import TestEnv
from examples.async_rpc import registry


async def test_caller_step_waits_for_the_responders_answer() -> None:
    async with TestEnv(registry) as env:
        caller = env.client.get_or_create("caller", ["main"])
        await caller.send("jobs", {"value": 21})
        await caller.send("jobs", {"value": 4})
        await env.run_until_idle()

        assert (await caller.call("get_state")).answers == [42, 8]
        responder = env.client.get_or_create("responder", ["main"])
        assert (await responder.get_state()).handled == 2
        asks = [e for e in await caller.history() if e.location.endswith("/ask-responder")]
        assert [e.output for e in asks] == [42, 8] and all(e.attempts == 1 for e in asks)


async def test_client_send_wait_gets_the_completion_once_per_message_id() -> None:
    async with TestEnv(registry) as env:
        responder = env.client.get_or_create("responder", ["main"])
        first = await responder.send("requests", {"value": 5}, wait=True, timeout=5, message_id="req-1")
        again = await responder.send("requests", {"value": 5}, wait=True, timeout=5, message_id="req-1")

        assert first.status == "completed" and first.response == {"doubled": 10}
        assert again.status == "completed" and again.response == {"doubled": 10}
        assert (await responder.get_state()).handled == 1  # the duplicate was not handled again
