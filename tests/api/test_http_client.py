"""The HTTP client on its own: retries and backoff (against a scripted transport, with a fake sleep),
error mapping, long send waits across the server's cap, JSON without a registry, and the sync wrapper."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from dormant import InvalidMessageError, UnknownQueueError
from dormant.errors import StorageError
from dormant.http.client import (
    ActionFailedError,
    HttpClient,
    HttpError,
    RetryPolicy,
    SyncHttpClient,
    UnauthorizedError,
)
from dormant.settings import Settings
from tests.api.apps import AccountState, registry
from tests.api.support import TOKEN, served_env

Script = list[Callable[[httpx.Request], httpx.Response]]


def error(status: int, code: str, message: str = "x", headers: dict[str, str] | None = None) -> Callable[
        [httpx.Request], httpx.Response]:
    return lambda _: httpx.Response(status, json={"error": {"code": code, "message": message}}, headers=headers)


def ok(body: Any, status: int = 200) -> Callable[[httpx.Request], httpx.Response]:
    return lambda _: httpx.Response(status, json=body)


def refuse(_: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused")


def lose_reply(_: httpx.Request) -> httpx.Response:
    raise httpx.ReadError("connection reset after the request was sent")


class Scripted:
    """A transport answering requests from a script, recording each request."""

    def __init__(self, *script: Callable[[httpx.Request], httpx.Response]) -> None:
        self.script = list(script)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.script.pop(0)(request)


def client_for(scripted: Scripted, sleeps: list[float], **options: Any) -> HttpClient:
    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return HttpClient("http://api.test", transport=httpx.MockTransport(scripted), sleep=fake_sleep, **options)


async def test_sends_are_retried_with_backoff_and_keep_their_message_id() -> None:
    scripted = Scripted(error(503, "storage_unavailable"), refuse, lose_reply, error(429, "throttled"),
                        ok({"status": "queued", "id": "?"}, 202))
    sleeps: list[float] = []
    async with client_for(scripted, sleeps, retry=RetryPolicy(attempts=5, base_delay=0.1, max_delay=10)) as client:
        result = await client.get_or_create("account", ["a"]).send("deposit", {"amount": 1})
    assert result.status == "queued"
    ids = {r.headers["idempotency-key"] for r in scripted.requests}
    assert len(scripted.requests) == 5 and len(ids) == 1  # every retry is the same message
    assert [json.loads(r.content) for r in scripted.requests] == [{"amount": 1}] * 5
    assert len(sleeps) == 4
    for attempt, slept in enumerate(sleeps, start=1):  # 0.1 * 2^(n-1), jittered down to half at most
        assert 0.05 * 2 ** (attempt - 1) <= slept <= 0.1 * 2 ** (attempt - 1)


async def test_retry_after_is_honoured_and_attempts_run_out() -> None:
    scripted = Scripted(error(503, "storage_unavailable", headers={"Retry-After": "1.5"}),
                        error(503, "storage_unavailable", headers={"Retry-After": "1.5"}),
                        error(503, "storage_unavailable", "the table is throttled"))
    sleeps: list[float] = []
    async with client_for(scripted, sleeps, retry=RetryPolicy(attempts=3)) as client:
        with pytest.raises(StorageError, match="throttled"):
            await client.get_or_create("account", ["a"]).status()
    assert sleeps == [1.5, 1.5] and len(scripted.requests) == 3


async def test_actions_are_retried_only_when_they_cannot_have_run() -> None:
    sleeps: list[float] = []
    scripted = Scripted(refuse, error(429, "throttled"), error(503, "busy"), ok({"result": 3}))
    async with client_for(scripted, sleeps) as client:
        assert await client.get_or_create("account", ["a"]).call("add", 3) == 3
    assert len(scripted.requests) == 4

    for outcome in (lose_reply, error(502, "bad_gateway"), error(500, "action_failed", "ValueError: no")):
        scripted = Scripted(outcome, ok({"result": 3}))
        async with client_for(scripted, sleeps) as client:
            with pytest.raises((httpx.ReadError, HttpError)):
                await client.get_or_create("account", ["a"]).call("add", 3)
        assert len(scripted.requests) == 1  # the action may have run: not repeated


async def test_error_answers_become_dormant_exceptions() -> None:
    sleeps: list[float] = []
    detail = [{"type": "missing", "loc": ["amount"], "msg": "Field required"}]
    scripted = Scripted(
        error(404, "unknown_queue", 'actor "account" has no queue "q"'),
        lambda _: httpx.Response(422, json={"error": {"code": "invalid_body", "message": "bad", "detail": detail}}),
        error(401, "unauthorized"),
        error(500, "action_failed", "ValueError: the action went wrong"),
        lambda _: httpx.Response(502, text="<html>Bad Gateway</html>"),
    )
    async with client_for(scripted, sleeps, retry=RetryPolicy(attempts=1)) as client:
        handle = client.get_or_create("account", ["a"])
        with pytest.raises(UnknownQueueError, match='no queue "q"'):
            await handle.send("q", {})
        with pytest.raises(InvalidMessageError) as invalid:
            await handle.send("deposit", {})
        assert invalid.value.errors == detail
        with pytest.raises(UnauthorizedError):
            await handle.history()
        with pytest.raises(ActionFailedError) as failed:
            await handle.explode()
        assert failed.value.message == "ValueError: the action went wrong"
        with pytest.raises(HttpError) as bad_gateway:
            await handle.status()
        assert bad_gateway.value.status == 502 and "Bad Gateway" in bad_gateway.value.message


async def test_a_long_wait_outlives_the_servers_cap_by_asking_again() -> None:
    scripted = Scripted(ok({"status": "timedOut", "id": "m-1"}), ok({"status": "timedOut", "id": "m-1"}),
                        ok({"status": "completed", "id": "m-1", "response": {"ok": True}}))
    sleeps: list[float] = []
    async with client_for(scripted, sleeps) as client:
        result = await client.get_or_create("account", ["a"]).send("withdraw", {"amount": 1}, wait=True,
                                                                   timeout=120, message_id="m-1")
    assert (result.status, result.response) == ("completed", {"ok": True})
    assert {r.headers["idempotency-key"] for r in scripted.requests} == {"m-1"}
    timeouts = [float(r.url.params["timeout"]) for r in scripted.requests]
    assert timeouts[0] <= 120 and timeouts == sorted(timeouts, reverse=True)
    assert sleeps == []  # a timedOut answer is not an error: asked again at once


async def test_without_a_registry_state_and_results_are_json() -> None:
    async with served_env(registry) as (env, url), HttpClient(url) as raw, \
            HttpClient(url, registry=registry) as typed:
        await raw.get_or_create("account", ["a"], input={"owner": "Ann"}).send("deposit", {"amount": 2})
        await env.run_until_idle()
        assert await raw.get_or_create("account", ["a"]).state() == {"owner": "Ann", "balance": 2,
                                                                     "entries": [2]}
        assert await raw.get_or_create("account", ["a"]).get_state() == {"owner": "Ann", "balance": 2,
                                                                         "entries": [2]}
        assert await typed.get_or_create("account", ["a"]).state() == AccountState(owner="Ann", balance=2,
                                                                                   entries=[2])
        with pytest.raises(InvalidMessageError):  # checked by the server this time
            await raw.get_or_create("account", ["b"]).send("deposit", {"amount": 0})
        assert await env.store.exists(raw.get_or_create("account", ["b"]).ref) is False


async def test_history_needs_the_token_when_the_server_is_not_in_dev_mode() -> None:
    settings = Settings(inspector_token=TOKEN, auth_mode="none")  # type: ignore[arg-type]
    async with served_env(registry, settings) as (env, url), HttpClient(url, registry=registry) as anonymous, \
            HttpClient(url, TOKEN, registry=registry) as inspector:
        await anonymous.get_or_create("account", ["a"]).send("deposit", {"amount": 2})
        await env.run_until_idle()
        with pytest.raises(UnauthorizedError):
            await anonymous.get_or_create("account", ["a"]).history()
        history = await inspector.get_or_create("account", ["a"]).history()
        assert [e.name for e in history] == ["account-loop", "wait-command", "apply"]


def test_the_sync_wrapper_works_from_plain_code() -> None:
    started = threading.Event()
    stop: dict[str, Any] = {}
    address: dict[str, str] = {}

    async def server() -> None:  # the API and its worker on their own thread and loop
        async with served_env(registry) as (_, url):
            address["url"] = url
            stop["event"] = asyncio.Event()
            stop["loop"] = asyncio.get_running_loop()
            started.set()
            await stop["event"].wait()

    thread = threading.Thread(target=asyncio.run, args=(server(),), daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        with SyncHttpClient(address["url"], registry=registry) as client:
            handle = client.get_or_create("account", ["sync"], input={"owner": "Script"})
            assert handle.send("withdraw", {"amount": 1}, wait=True, timeout=5).response == {"ok": False,
                                                                                             "balance": 0}
            assert handle.send("deposit", {"amount": 4}).status == "queued"
            assert handle.add(6) in (6, 10)  # the deposit may or may not have been applied yet
            assert handle.send("withdraw", {"amount": 10}, wait=True, timeout=5).response == {"ok": True,
                                                                                              "balance": 0}
            state = handle.state()
            assert isinstance(state, AccountState) and (state.owner, state.balance) == ("Script", 0)
            assert [e.payload["kind"] for e in handle.events()] == ["deposit", "withdraw"]
            assert handle.status().waiting_for.queues == ["deposit", "withdraw"]
    finally:
        stop["loop"].call_soon_threadsafe(stop["event"].set)
        thread.join(10)
