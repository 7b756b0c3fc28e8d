"""Pause/unpause, kept versions, fork and reset through the operator routes: the same through the in-process and the
HTTP client (`connect`), and hostile requests refused with a 4xx that names the field, never echoes the value, and
changes nothing stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from dormant.errors import ActorExistsError, ActorPausedError, VersionNotRetainedError, WouldDivergeError
from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from dormant.workflow.history import WorkflowState
from tests.api.conftest import Connect
from tests.api.support import TOKEN, dump_store
from tests.unit.test_pause import registry as pause_registry
from tests.unit.test_rewind import registry, renamed

SECRET = "SECRET-VALUE-9f2c"  # put in hostile fields: no answer may repeat it


@asynccontextmanager
async def api(env: TestEnv, *, token: bool = True) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(dev=False, auth_mode="none", inspector_token=TOKEN)  # type: ignore[arg-type]
    app = create_app(env.registry, settings, service=env.service)
    headers = {"X-Dormant-Operator-Token": TOKEN} if token else {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api",
                                 headers=headers) as http:
        yield http


async def _ledger(env: TestEnv, key: str, bodies: list[int]) -> dict[int, int]:
    handle = env.client.get_or_create("ledger", [key], input={"owner": key})
    at = {}
    for n in bodies:
        await handle.send("add", {"n": n})
        await env.run_until_idle()
        at[n] = (await handle.status()).version
    return at


async def test_pause_fork_and_reset_behave_alike_in_process_and_over_http(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        at = await _ledger(env, "a", [1, 2, 3])
        handle = client.get_or_create("ledger", ["a"])
        paused = await handle.pause("look first")
        assert (paused.operation, paused.outcome) == ("pause", "paused")
        status = await handle.status()
        assert status.workflow is WorkflowState.PAUSED and status.paused is not None
        assert status.paused.reason == "look first"
        with pytest.raises(ActorPausedError):
            await handle.resume()
        kept = await handle.versions()
        assert [v.version for v in kept][-1] == status.version
        old = await handle.version(at[2])
        assert old.version == at[2] and old.state["log"] == [1, 2]
        with pytest.raises(VersionNotRetainedError):
            await handle.version(status.version + 5)
        forked = await handle.fork(at[2], ["a", "copy"], reason="try")
        assert (forked.outcome, forked.key) == ("forked", ["a", "copy"])
        with pytest.raises(ActorExistsError):
            await handle.fork(at[2], ["a", "copy"])
        reset = await handle.reset(at[1], reason="undo 2 and 3")
        assert reset.outcome == "reset" and "still paused" in reset.message
        unpaused = await handle.unpause()
        assert unpaused.outcome == "unpaused"
        await env.run_until_idle()
        assert (await handle.state()).log == [1]
        assert (await client.get_or_create("ledger", ["a", "copy"]).state()).log == [1, 2]
        for key in ("b1", "b2"):
            await _ledger(env, key, [5])
        assert [r.outcome for r in await client.pause_all("ledger", page_size=1)] == ["paused"] * 4
        assert [r.outcome for r in await client.unpause_all("ledger", page_size=1)] == ["unpaused"] * 4


async def test_a_refused_fork_or_reset_carries_the_divergence_over_http(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        at = await _ledger(env, "d", [1])
        store = env.store
    async with TestEnv(renamed, store=store) as deployed:
        client = await connect(deployed)
        handle = client.get_or_create("ledger", ["d"])
        with pytest.raises(WouldDivergeError) as refused:
            await handle.fork(at[1], "d2")
        assert refused.value.divergence["location"] == "open"
        with pytest.raises(WouldDivergeError):
            await handle.reset(at[1])


HOSTILE_FORKS: list[tuple[Any, int, str]] = [
    ({"key": ["n"]}, 422, "version"),
    ({"version": 0, "key": ["n"]}, 422, "version"),
    ({"version": -1, "key": ["n"]}, 422, "version"),
    ({"version": SECRET, "key": ["n"]}, 422, "version"),
    ({"version": 1e30, "key": ["n"]}, 422, "version"),
    ({"version": True, "key": ["n"]}, 422, "version"),
    ({"version": 2.0, "key": ["n"]}, 422, "version"),
    ({"version": 2}, 422, "key"),
    ({"version": 2, "key": []}, 422, "key"),
    ({"version": 2, "key": SECRET}, 422, "key"),
    ({"version": 2, "key": [""]}, 400, "invalid_key"),
    ({"version": 2, "key": [SECRET * 200]}, 400, "invalid_key"),
    ({"version": 2, "key": ["n"], "extra": SECRET}, 422, "extra"),
    ({"version": 2, "key": ["n"], "reason": ""}, 422, "reason"),
    ({"version": 2, "key": ["n"], "reason": SECRET * 40}, 422, "reason"),
    ({"version": 2, "key": ["n"], "paused": SECRET}, 422, "paused"),
    ({"version": 999, "key": ["n"]}, 409, "version_not_retained"),
    ({"version": 2, "key": ["taken"]}, 409, "actor_exists"),
    ({"version": 2, "key": ["src"]}, 409, "actor_exists"),
    ([SECRET], 422, "invalid_request"),
]


@pytest.mark.parametrize(("body", "status", "named"), HOSTILE_FORKS)
async def test_hostile_forks_are_refused_naming_the_field_and_store_nothing(body: Any, status: int,
                                                                           named: str) -> None:
    async with TestEnv(registry) as env, api(env) as http:
        await _ledger(env, "src", [1, 2])
        await _ledger(env, "taken", [1])
        before = dump_store(env.store)
        response = await http.post("/actors/ledger/src/fork", json=body)
        assert response.status_code == status, response.text
        assert named in response.text and SECRET not in response.text
        assert dump_store(env.store) == before


@pytest.mark.parametrize(("raw", "status"), [(b"{", 422), (b"x" * 5000, 413), (b"", 422), (b"null", 422)])
async def test_bodies_that_are_not_a_fork_request_are_refused(raw: bytes, status: int) -> None:
    async with TestEnv(registry) as env, api(env) as http:
        await _ledger(env, "src", [1])
        before = dump_store(env.store)
        response = await http.post("/actors/ledger/src/fork", content=raw,
                                   headers={"Content-Type": "application/json"})
        assert response.status_code == status, response.text
        assert dump_store(env.store) == before


@pytest.mark.parametrize(("method", "path", "body", "status", "code"), [
    ("POST", "/actors/nope/src/fork", {"version": 1, "key": ["n"]}, 404, "unknown_actor"),
    ("POST", "/actors/ledger/nobody/fork", {"version": 1, "key": ["n"]}, 404, "actor_not_found"),
    ("POST", "/actors/ledger/nobody/reset", {"version": 1}, 404, "actor_not_found"),
    ("POST", "/actors/ledger/nobody/pause", None, 404, "actor_not_found"),
    ("POST", "/actors/ledger/nobody/unpause", None, 404, "actor_not_found"),
    ("GET", "/actors/ledger/nobody/versions", None, 404, "actor_not_found"),
    ("GET", "/actors/ledger/src/versions/0", None, 422, "version"),
    ("GET", "/actors/ledger/src/versions/x", None, 422, "version"),
    ("GET", "/actors/ledger/src/versions/999", None, 409, "version_not_retained"),
    ("POST", "/actors/ledger/src/reset", {"version": 0}, 422, "version"),
    ("POST", "/actors/ledger/src/reset", {"version": 999}, 409, "version_not_retained"),
    ("POST", "/actors/ledger/src/reset", {"version": 2, "reason": SECRET * 40}, 422, "reason"),
    ("POST", "/actors/ledger/src/reset", {"version": 2, "extra": 1}, 422, "extra"),
    ("POST", "/actors/ledger/src/reset", None, 422, "version"),
    ("POST", "/actors/ledger/src/pause", {"reason": SECRET * 40}, 422, "reason"),
    ("POST", "/actors/ledger/src/pause", {"why": SECRET}, 422, "why"),
    ("POST", "/actors/ledger/pause?status=" + SECRET, None, 422, "status"),
    ("POST", "/actors/ledger/unpause?cursor=" + SECRET, None, 400, "invalid_cursor"),
    ("POST", "/actors/ledger/%2E%2E/pause", None, 400, "invalid_key"),
])
async def test_hostile_operator_requests_are_refused_and_change_nothing(method: str, path: str, body: Any,
                                                                       status: int, code: str) -> None:
    async with TestEnv(registry) as env, api(env) as http:
        await _ledger(env, "src", [1, 2])
        before = dump_store(env.store)
        response = await http.request(method, path, json=body)
        assert response.status_code == status, response.text
        assert code in response.text and SECRET not in response.text
        assert dump_store(env.store) == before


async def test_every_new_route_needs_the_operator_token_before_anything_is_read() -> None:
    async with TestEnv(registry) as env, api(env, token=False) as http:
        await _ledger(env, "src", [1])
        before = dump_store(env.store)
        for method, path in [("POST", "/actors/ledger/src/pause"), ("POST", "/actors/ledger/src/unpause"),
                             ("POST", "/actors/ledger/pause"), ("POST", "/actors/ledger/unpause"),
                             ("GET", "/actors/ledger/src/versions"), ("GET", "/actors/ledger/src/versions/1"),
                             ("POST", "/actors/ledger/src/fork"), ("POST", "/actors/ledger/src/reset"),
                             ("POST", "/actors/ledger/nobody/fork")]:
            response = await http.request(method, path, json={"version": 1, "key": ["n"]})
            assert response.status_code == 401, (path, response.text)
        assert dump_store(env.store) == before


async def test_actions_on_a_paused_actor_answer_409_actor_paused() -> None:
    async with TestEnv(pause_registry) as env, api(env) as http:
        await _ledger(env, "src", [1])
        assert (await http.post("/actors/ledger/src/pause", json={"reason": "hold"})).status_code == 200
        before = dump_store(env.store)
        called = await http.post("/actors/ledger/src/actions/bump", json=[5])
        assert (called.status_code, called.json()["error"]["code"]) == (409, "actor_paused")
        assert dump_store(env.store) == before
        sent = await http.post("/actors/ledger/src/queues/add", json={"n": 4})
        assert (sent.status_code, sent.json()["workflow"]) == (202, "paused")
        resumed = await http.post("/actors/ledger/src/resume")
        assert (resumed.status_code, resumed.json()["error"]["code"]) == (409, "actor_paused")
        listed = await http.get("/actors/ledger", params={"status": "paused"})
        assert [a["key"] for a in listed.json()["actors"]] == [["src"]]
        status = (await http.get("/actors/ledger/src/status")).json()
        assert status["paused"]["by"] == "anonymous:anonymous" and status["paused"]["previous"] == "sleeping"
