"""The inspection routes of the operator API over a TestEnv: counts per status, the actors that need attention,
an actor's pending inbox, and firing an actor's next timer, a route that exists only under `dormant dev`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from dormant.http.app import create_app
from dormant.ports import InboxMessage
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.api.apps import registry
from tests.api.support import TOKEN

SLEEPER = "/actors/sleeper/s1"


@asynccontextmanager
async def api(env: TestEnv, *, dev: bool) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(dev=dev, auth_mode="none", inspector_token=TOKEN)  # type: ignore[arg-type]
    app = create_app(registry, settings, service=env.service)
    headers = {} if dev else {"X-Dormant-Operator-Token": TOKEN}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api",
                                 headers=headers) as http:
        yield http


async def test_a_sleeper_fired_through_its_timers_shows_up_retrying_then_failed_with_its_inbox() -> None:
    async with TestEnv(registry) as env, api(env, dev=True) as http:
        assert (await http.post(f"{SLEEPER}/queues/go", json=1)).status_code == 202
        await env.run_until_idle()
        started = env.now()
        fired = await http.post(f"{SLEEPER}/fire-timer")
        assert fired.status_code == 200, fired.text
        assert fired.json()["outcome"] == "fired" and "sleep nap" in fired.json()["message"]
        await env.run_until_idle()
        status = (await http.get(f"{SLEEPER}/status")).json()
        assert status["workflow"] == "sleeping" and status["waiting_for"]["retry_at"] is not None
        attention = (await http.get("/actors/sleeper/attention")).json()
        assert attention == {"truncated": False, "actors": [{
            "name": "sleeper", "key": ["s1"], "segment": "s1", "reason": "retrying", "status": "sleeping",
            "since": started, "detail": "step flaky failed 1 attempt(s): RuntimeError: try 1 failed"}]}
        assert "the retry of step flaky" in (await http.post(f"{SLEEPER}/fire-timer")).json()["message"]
        await env.run_until_idle()
        assert (await http.get(f"{SLEEPER}/status")).json()["workflow"] == "failed"
        attention = (await http.get("/actors/sleeper/attention")).json()
        assert [(a["key"], a["reason"]) for a in attention["actors"]] == [(["s1"], "failed")]
        refused = await http.post(f"{SLEEPER}/fire-timer")
        assert (refused.status_code, refused.json()["error"]["code"]) == (409, "no_timer")
        # a failed actor keeps the messages sent to it: they wait in its inbox
        sent = await http.post(f"{SLEEPER}/queues/go", json=7, headers={"Idempotency-Key": "go-7"})
        assert sent.json()["workflow"] == "failed"
        inbox = (await http.get(f"{SLEEPER}/inbox")).json()
        assert inbox["total"] == 1
        [waiting] = inbox["messages"]
        assert (waiting["id"], waiting["kind"], waiting["queue"], waiting["preview"], waiting["bytes"],
                waiting["truncated"], waiting["sender"]) == ("go-7", "queue", "go", "7", 1, False, "dev:dev")
        counts = (await http.get("/actors/sleeper/counts")).json()
        assert counts["counts"]["failed"] == {"count": 1, "exact": True}
        assert counts["counts"]["sleeping"] == {"count": 0, "exact": True}


async def test_the_inbox_previews_long_bodies_and_pages_by_limit() -> None:
    async with TestEnv(registry) as env, api(env, dev=False) as http:
        for amount in range(1, 4):  # not consumed: deposits wait until the account's workflow gets to them
            note = "x" * 300 if amount == 1 else None
            await env.store.enqueue(env.client.get_or_create("account", ["ann"]).ref, _message(amount, note))
        await http.put("/actors/account/ann")
        inbox = (await http.get("/actors/account/ann/inbox?limit=2")).json()
        assert inbox["total"] == 3 and [m["id"] for m in inbox["messages"]] == ["m1", "m2"]
        first = inbox["messages"][0]
        assert first["truncated"] and len(first["preview"]) == 200 and first["bytes"] > 300
        assert (await http.get("/actors/account/ann/inbox?limit=0")).status_code == 422
        assert (await http.get("/actors/account/nobody/inbox")).json()["error"]["code"] == "actor_not_found"
        assert (await http.get("/actors/nope/ann/inbox")).json()["error"]["code"] == "unknown_actor"


async def test_firing_a_timer_is_a_dev_route_only() -> None:
    async with TestEnv(registry) as env:
        async with api(env, dev=False) as http:
            await http.post(f"{SLEEPER}/queues/go", json=1)
            await env.run_until_idle()
            response = await http.post(f"{SLEEPER}/fire-timer")
            assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")
            assert "/actors/{actor}/{key}/fire-timer" not in (await http.get("/openapi.json")).json()["paths"]
        async with api(env, dev=True) as http:
            assert "/actors/{actor}/{key}/fire-timer" in (await http.get("/openapi.json")).json()["paths"]
            for target, status, code in ((f"{SLEEPER}/fire-timer", 200, None),
                                         ("/actors/sleeper/nobody/fire-timer", 404, "actor_not_found"),
                                         ("/actors/nope/s1/fire-timer", 404, "unknown_actor"),
                                         ("/actors/sleeper/a,,b/fire-timer", 400, "invalid_key")):
                response = await http.post(target)
                assert response.status_code == status, (target, response.text)
                if code is not None:
                    assert response.json()["error"]["code"] == code


def _message(amount: int, note: str | None) -> InboxMessage:
    return InboxMessage(id=f"m{amount}", queue="deposit", body={"amount": amount, "note": note}, created_at=1.0)
