"""`client.get` (a handle that never creates) and `client.create` (created now, or ActorExistsError), run with the
in-process client and with the HTTP client against the real FastAPI app over the same TestEnv (`connect`)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from dormant import ActorExistsError, ActorNotFoundError
from dormant.testing import TestEnv
from tests.api.apps import AccountState, registry
from tests.api.conftest import Connect
from tests.api.support import served_env


async def listed(client: Any) -> list[tuple[str, ...]]:
    return [tuple(summary.key) for summary in (await client.list_actors("account")).actors]


async def test_every_request_through_get_on_a_missing_actor_raises_and_creates_nothing(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        handle = client.get("account", ["nobody"])
        requests = [lambda: handle.send("deposit", {"amount": 1}), lambda: handle.send_many("deposit", [{"amount": 1}]),
                    lambda: handle.call("get_state"), handle.state, handle.status, handle.history]
        for request in requests:
            with pytest.raises(ActorNotFoundError):
                await request()
        with pytest.raises(ActorNotFoundError):
            async for _ in handle.events(follow=False):
                pass
        await env.run_until_idle()
        assert await listed(client) == []
        assert await env.store.load(handle.ref) is None


async def test_get_reaches_an_existing_actor_and_fails_once_it_is_deleted(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        await client.get_or_create("account", ["alice"]).send("deposit", {"amount": 5})
        await env.run_until_idle()
        handle = client.get("account", ["alice"])
        assert (await handle.state()).balance == 5
        await handle.send("deposit", {"amount": 2})
        await env.run_until_idle()
        assert (await handle.call("get_state")).balance == 7
        await handle.delete()
        with pytest.raises(ActorNotFoundError):
            await handle.send("deposit", {"amount": 1})
        with pytest.raises(ActorNotFoundError):
            await handle.state()
        await env.run_until_idle()
        assert await listed(client) == []


async def test_create_runs_on_create_at_once_and_refuses_a_second_time(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        handle = await client.create("account", ["bob"], input={"owner": "Bob", "opening": 3})
        assert await listed(client) == [("bob",)]  # created now, before any request through the handle
        assert await handle.state() == AccountState(owner="Bob", balance=3)
        with pytest.raises(ActorExistsError):
            await client.create("account", ["bob"], input={"owner": "Mallory", "opening": 100})
        assert (await handle.state()).owner == "Bob"  # the refused create ran nothing
        await handle.delete()
        with pytest.raises(ActorNotFoundError):  # a created handle never creates again
            await handle.state()
        again = await client.create("account", ["bob"])
        assert (await again.state()).owner == ""


async def test_over_http_the_answers_are_404_and_409_and_never_echo_the_key() -> None:
    secret = "key-that-must-not-echo"
    async with served_env(registry) as (env, url), httpx.AsyncClient(base_url=url) as http:
        missing = [await http.post(f"/actors/account/{secret}/queues/deposit", params={"create": "false"},
                                   json={"amount": 1}),
                   await http.post(f"/actors/account/{secret}/queues/deposit/batch", params={"create": "false"},
                                   json={"messages": [{"body": {"amount": 1}}]}),
                   await http.post(f"/actors/account/{secret}/actions/get_state", params={"create": "false"}),
                   await http.get(f"/actors/account/{secret}/state"),
                   await http.get(f"/actors/account/{secret}/status")]
        for response in missing:
            assert response.status_code == 404, response.text
            assert response.json()["error"]["code"] == "actor_not_found"
            assert "actor" in response.json()["error"]["message"]
            assert secret not in response.text
        assert (await http.get("/actors/account")).json()["actors"] == []
        create_only = {"If-None-Match": "*"}
        first = await http.put(f"/actors/account/{secret}", json={"input": {"owner": "x"}}, headers=create_only)
        second = await http.put(f"/actors/account/{secret}", json={"input": {"owner": "y"}}, headers=create_only)
        assert (first.status_code, second.status_code) == (201, 409)
        assert second.json()["error"]["code"] == "actor_exists" and secret not in second.text
        assert (await env.client.get("account", [secret]).state()).owner == "x"


async def test_no_read_route_creates_a_missing_actor() -> None:
    async with served_env(registry) as (env, url), httpx.AsyncClient(base_url=url) as http:
        base = "/actors/account/ghost"
        reads = ["/state", "/status", "/status?history=true", "/history", "/events", "/events?wait=0.01",
                 "/inspector/workflow-history", "/inspector/export", "/inbox", "/values", "/versions", "/versions/1"]
        for suffix in reads:
            response = await http.get(base + suffix)
            assert response.status_code == 404, (suffix, response.text)
            assert response.json()["error"]["code"] == "actor_not_found", suffix
        await env.run_until_idle()
        assert (await http.get("/actors/account")).json()["actors"] == []
        assert await env.store.load(env.service.ref("account", "ghost")) is None
