"""The per-actor authorization hook and the caller's identity: who may do what (403 `forbidden` otherwise,
nothing stored changes), `c.caller` in actions, `message.sender` in the workflow (recorded in history, so a
replay sees the same value), in-process and over HTTP (dev users), and the bound on long waits per caller."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from dormant import Caller, ForbiddenError
from dormant.http.app import create_app
from dormant.http.client import HttpClient
from dormant.settings import Settings
from dormant.testing import TestEnv
from dormant.workflow.history import HistoryEntry
from tests.api import vault_app
from tests.api.support import dump_store, serve, served_env
from tests.api.vault_app import registry

ALICE = Caller(kind="jwt", id="alice", claims={"sub": "alice", "email": "alice@example.com"})
MALLORY = Caller(kind="jwt", id="mallory", claims={"sub": "mallory"})
ADMIN = Caller(kind="jwt", id="ops", scopes=("vault/admin",))


@pytest.fixture(autouse=True)
def clear_asked() -> None:
    vault_app.ASKED.clear()


async def test_the_hook_allows_the_owner_and_refuses_others_before_anything_is_stored() -> None:
    async with TestEnv(registry) as env:
        mine = env.client.as_caller(ALICE).get_or_create("vault", ["alice"])
        await mine.send("deposit", {"amount": 5})
        await env.run_until_idle()
        before = dump_store(env.store)
        theirs = env.client.as_caller(MALLORY).get_or_create("vault", ["alice"])
        refusals = [('jwt:mallory may not send to queue "deposit"', theirs.send("deposit", {"amount": 1})),
                    ('jwt:mallory may not call action "balance"', theirs.call("balance")),
                    ("jwt:mallory may not read the state", theirs.state()),
                    ("jwt:mallory may not subscribe to the events", anext(theirs.events(follow=False))),
                    ("jwt:alice may not read the status", mine.status()),
                    ("jwt:mallory may not read the history", theirs.history())]
        for message, attempt in refusals:
            with pytest.raises(ForbiddenError, match=message):
                await attempt
        # a refused request never created, wrote or woke anything
        assert dump_store(env.store) == before
        never = env.client.as_caller(MALLORY).get_or_create("vault", ["nobody"])
        with pytest.raises(ForbiddenError):
            await never.send("deposit", {"amount": 1})
        assert await env.store.exists(never.ref) is False
        # the owner may; an admin may read the status; the application itself (no caller) is not asked
        assert await mine.call("balance") == 5
        assert (await env.client.as_caller(ADMIN).get_or_create("vault", ["alice"]).status()).version >= 2
        asked_before = len(vault_app.ASKED)
        assert await env.client.get_or_create("vault", ["alice"]).call("balance") == 5
        assert len(vault_app.ASKED) == asked_before
        operations = [(r.operation, r.target, r.caller.id) for r in vault_app.ASKED]
        assert ("send", "deposit", "mallory") in operations and ("call", "balance", "mallory") in operations


async def test_only_true_allows() -> None:
    verdicts: list[Any] = [None, 1, "yes", False]
    definition = registry.get("vault")
    original = definition.authorize_fn
    try:
        for verdict in verdicts:
            definition.authorize_fn = lambda request, v=verdict: v
            async with TestEnv(registry) as env:
                with pytest.raises(ForbiddenError):
                    await env.client.as_caller(ALICE).get_or_create("vault", ["alice"]).call("balance")

        async def slow_yes(request: Any) -> bool:
            await asyncio.sleep(0)
            return True

        definition.authorize_fn = slow_yes  # async hooks are awaited
        async with TestEnv(registry) as env:
            assert await env.client.as_caller(MALLORY).get_or_create("vault", ["alice"]).call("balance") == 0

        def explain(request: Any) -> bool:
            raise ForbiddenError("vaults are closed on Sundays")

        definition.authorize_fn = explain
        async with TestEnv(registry) as env:
            with pytest.raises(ForbiddenError, match="closed on Sundays"):
                await env.client.as_caller(ALICE).get_or_create("vault", ["alice"]).call("balance")
    finally:
        definition.authorize_fn = original


async def test_the_caller_reaches_actions_and_the_workflow_and_history_keeps_the_sender() -> None:
    async with TestEnv(registry) as env:
        mine = env.client.as_caller(ALICE).get_or_create("vault", ["alice"])
        assert await mine.call("whoami") == ALICE.model_dump(mode="json")
        await mine.send("deposit", {"amount": 2})
        # another actor sends from a step: the target's hook sees the teller as the caller
        await env.client.get_or_create("teller", ["t1"]).send("transfer", {"vault": "alice", "amount": 3})
        await env.run_until_idle()
        state = await mine.state()
        assert state.balance == 5 and state.created_by == "jwt:alice"
        assert state.senders == ["jwt:alice", "actor:teller/t1"]
        assert ("send", "deposit", "teller/t1") in [(r.operation, r.target, r.caller.id) for r in vault_app.ASKED]
        history = await env.client.get_or_create("vault", ["alice"]).history()
        received = [m for entry in history if entry.kind == "message" for m in entry.messages]
        assert [m.sender for m in received] == [ALICE, Caller(kind="actor", id="teller/t1",
                                                                claims={"name": "teller", "key": ["t1"]})]

        # a new deploy replays the stored history: the workflow sees the recorded senders, not new ones
        async with TestEnv(registry, store=env.store) as again:
            await again.run_until_idle()
            replayed = await again.client.get_or_create("vault", ["alice"]).state()
            assert replayed.senders == ["jwt:alice", "actor:teller/t1"]


def test_histories_recorded_before_senders_still_load() -> None:
    old = {"location": "vault-loop/~1/wait-deposit", "kind": "message", "name": "wait-deposit", "seq": 3,
           "status": "completed", "messages": [{"id": "m1", "name": "deposit", "body": {"amount": 1},
                                                "created_at": 1.0, "completed": False}]}
    entry = HistoryEntry.model_validate(old)
    assert entry.messages[0].sender is None
    from dormant.ports import InboxMessage

    assert InboxMessage.model_validate({"id": "m1", "queue": "deposit", "created_at": 1.0}).sender is None


# -- over HTTP (dev users name themselves with X-Dormant-Dev-User) ------------------------------------------
async def test_http_routes_ask_the_hook_and_answer_403_before_reading_the_body() -> None:
    async with served_env(registry) as (env, url), httpx.AsyncClient(base_url=url) as http:
        alice = {"x-dormant-dev-user": "alice"}
        mallory = {"x-dormant-dev-user": "mallory"}
        assert (await http.put("/actors/vault/alice", headers=alice)).status_code == 201
        assert (await http.post("/actors/vault/alice/queues/deposit", json={"amount": 4}, headers=alice)
                ).status_code == 202
        await env.run_until_idle()
        before = dump_store(env.store)
        for method, path, body in [("PUT", "", None), ("POST", "/queues/deposit", b'{"amount": 1}'),
                                   ("POST", "/queues/deposit", b"not json at all"),
                                   ("POST", "/actions/balance", b"[1, 2, 3]"), ("GET", "/state", None),
                                   ("GET", "/events?wait=5", None), ("GET", "/status", None)]:
            response = await http.request(method, f"/actors/vault/alice{path}", content=body, headers=mallory)
            error = response.json()["error"]
            assert (response.status_code, error["code"]) == (403, "forbidden"), (method, path, response.text)
            assert "dev:mallory may not" in error["message"]
        assert dump_store(env.store) == before
        # unknown names are still 404 (the hook is asked about real queues and actions only)
        assert (await http.post("/actors/vault/alice/queues/nope", json={}, headers=mallory)).status_code == 404
        # the owner reads; the dev user `admin` reads the status
        assert (await http.get("/actors/vault/alice/state", headers=alice)).json()["senders"] == ["dev:alice"]
        assert (await http.get("/actors/vault/alice/status", headers={"x-dormant-dev-user": "admin"})
                ).status_code == 200
        whoami = (await http.post("/actors/vault/alice/actions/whoami", headers=alice)).json()["result"]
        assert whoami == {"kind": "dev", "id": "alice", "claims": {}, "scopes": []}
        bad = await http.get("/actors/vault/alice/state", headers={"x-dormant-dev-user": ""})
        assert bad.status_code == 400


async def test_the_http_client_raises_forbidden() -> None:
    async with served_env(registry) as (_, url), \
            HttpClient(url, registry=registry, headers={"x-dormant-dev-user": "mallory"}) as client:
        with pytest.raises(ForbiddenError):
            await client.get_or_create("vault", ["alice"]).send("deposit", {"amount": 1})


async def test_one_caller_holds_a_bounded_number_of_long_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(dev=True, api_max_waits_per_caller=2, api_max_wait=5)
    async with TestEnv(registry) as env, serve(create_app(registry, settings, service=env.service)) as url, \
            httpx.AsyncClient(base_url=url, timeout=30) as http:
        waiting: list[int] = []  # the polls the store is waiting on (each holds its caller's slot meanwhile)
        wait_events = env.store.wait_events

        async def counted(*args: Any, **kwargs: Any) -> Any:
            waiting.append(1)
            return await wait_events(*args, **kwargs)

        monkeypatch.setattr(env.store, "wait_events", counted)
        alice = {"x-dormant-dev-user": "alice"}
        bob = {"x-dormant-dev-user": "bob"}
        await http.put("/actors/vault/alice", headers=alice)
        await http.put("/actors/vault/bob", headers=bob)
        polls = [asyncio.create_task(http.get("/actors/vault/alice/events?wait=5", headers=alice))
                 for _ in range(2)]
        deadline = asyncio.get_running_loop().time() + 30
        while len(waiting) < 2:  # both are held open now
            assert asyncio.get_running_loop().time() < deadline, "the two polls never reached the store"
            await asyncio.sleep(0.005)
        third = await http.get("/actors/vault/alice/events?wait=5", headers=alice)
        assert (third.status_code, third.json()["error"]["code"]) == (429, "too_many_waits")
        assert third.headers["retry-after"] == "1"
        waited = await http.post("/actors/vault/alice/queues/deposit?wait=true&timeout=1", json={"amount": 1},
                                 headers=alice)
        assert waited.status_code == 429
        # another caller is not held up by alice's polls, and a poll without wait is never limited
        other = await http.get("/actors/vault/bob/events?wait=0.2", headers=bob)
        assert other.status_code == 200
        assert (await http.get("/actors/vault/alice/events", headers=alice)).status_code == 200
        await http.post("/actors/vault/alice/queues/deposit", json={"amount": 2}, headers=alice)
        await env.run_until_idle()
        answered = await asyncio.gather(*polls)
        assert [r.status_code for r in answered] == [200, 200]
        assert all(r.json()["events"][0]["payload"] == {"balance": 2} for r in answered)
        # the slots are free again
        assert (await http.get("/actors/vault/alice/events?wait=0.1&after=1", headers=alice)).status_code == 200
