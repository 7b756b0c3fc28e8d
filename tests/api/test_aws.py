"""The HTTP API on the AWS runtime: uvicorn on 127.0.0.1 serving `create_app(registry, settings)` (which
opens its own DynamoDB and SQS clients, as the API Lambda does) against DynamoDB Local and a moto server, with
the worker poller running all the time (tests/aws_env.py with autorun=True: the API's sends race the worker, as in
production). Round trips for every route, a request/response that survives a
poller restart between receive and complete, long-polled events in order, the hostile-request table
leaving the table unchanged, and functions/api/handler.py invoked as Lambda would."""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from dormant.errors import ActorExistsError, ActorNotFoundError
from dormant.http.app import create_app
from dormant.http.client import HttpClient
from dormant.settings import Settings
from dormant.workflow.history import EntryStatus, WorkflowState
from tests.api.apps import GATE, AccountState, registry
from tests.api.support import TOKEN, http_api_v2_event, lambda_body, raw_request, serve
from tests.api.test_hostile import CASES, LIMIT, _check, seed
from tests.api.test_mangum import HANDLER_PATH
from tests.aws_env import AwsTestEnv
from tests.servers import MotoServer, fake_aws_environment, scrubbed_variables


@pytest.fixture(scope="module")
def moto(dynamodb_local_server: str) -> Iterator[str]:
    """A moto server for this module (SQS; restarted by a test), DynamoDB on the session's DynamoDB Local (every
    Settings and the Lambda handler read AWS_ENDPOINT_URL_DYNAMODB), fake credentials so nothing can reach a real
    account."""
    with pytest.MonkeyPatch.context() as patch:
        for name in scrubbed_variables():
            patch.delenv(name)
        for name, value in fake_aws_environment().items():
            patch.setenv(name, value)
        patch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local_server)
        server = MotoServer()
        server.start()
        try:
            yield server.endpoint
        finally:
            server.stop()


def _settings(moto: str, **overrides: Any) -> Settings:
    return Settings(endpoint_url=moto, region="us-east-1", inspector_token=TOKEN,  # type: ignore[arg-type]
                    auth_mode="none", **overrides)


@asynccontextmanager
async def aws_api(moto: str, **overrides: Any) -> AsyncIterator[tuple[AwsTestEnv, str]]:
    """A worker (AwsTestEnv: table, queues, pollers) and the API served by uvicorn over the same resources."""
    async with AwsTestEnv(registry, settings=_settings(moto, **overrides), autorun=True) as env, \
            serve(create_app(registry, env.settings)) as url:
        yield env, url


async def scan(env: AwsTestEnv) -> list[dict[str, Any]]:
    """Every item of the env's table, in key order."""
    client = env.store.client  # type: ignore[attr-defined]
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": env.settings.table, "ConsistentRead": True}
    while True:
        page = await client.scan(**kwargs)
        items += page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return sorted(items, key=lambda item: (item["pk"]["S"], item["sk"]["S"]))


async def test_every_route_round_trips_on_aws(moto: str) -> None:
    async with aws_api(moto) as (env, url), HttpClient(url, TOKEN, registry=registry) as client, \
            httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
        bob = client.get_or_create("account", ["tenant/1", "bob"], input={"owner": "Bob", "opening": 5})
        assert await bob.send("deposit", {"amount": 10}, message_id="d-1") == await bob.send(
            "deposit", {"amount": 10}, message_id="d-1")  # the same id twice: one message
        receipt = await bob.send("withdraw", {"amount": 3}, wait=True, timeout=20)
        assert (receipt.status, receipt.response) == ("completed", {"ok": True, "balance": 12})
        assert await bob.add(8) == 20
        assert await bob.get_state() == AccountState(owner="Bob", balance=20, entries=[10, -3, 8])
        await env.run_until_idle()
        status = await bob.status()
        assert (status.workflow, status.waiting_for.queues) == (WorkflowState.SLEEPING, ["deposit", "withdraw"])
        history = await bob.history()
        assert [(e.name, e.status) for e in history][-1] == ("apply", EntryStatus.COMPLETED)
        events = [(r.seq, r.payload) async for r in bob.events(follow=False)]
        assert events == [(1, {"balance": 15, "kind": "deposit"}), (2, {"balance": 12, "kind": "withdraw"})]
        inspector = (await http.get("/actors/account/tenant~2F1,bob/inspector/workflow-history")).json()
        assert inspector["isWorkflowEnabled"] and inspector["workflowState"] == "sleeping"
        assert "/actors/account/{key}/queues/deposit" in (await http.get("/openapi.json")).json()["paths"]
        in_process = env.client.get_or_create("account", ["tenant/1", "bob"])
        assert (await in_process.state()).balance == 20  # the worker's view of the same item
        assert env.failures == []


async def test_get_never_creates_and_create_refuses_an_existing_actor_on_aws(moto: str) -> None:
    async with aws_api(moto) as (env, url), HttpClient(url, TOKEN, registry=registry) as client:
        ghost = client.get("account", ["ghost"])
        for request in (lambda: ghost.send("deposit", {"amount": 1}), lambda: ghost.call("get_state"), ghost.state):
            with pytest.raises(ActorNotFoundError):
                await request()
        with pytest.raises(ActorNotFoundError):
            await env.client.get("account", ["ghost"]).send("deposit", {"amount": 1})
        await env.run_until_idle()
        assert await scan(env) == []  # nothing stored: no actor, no message
        assert (await client.list_actors("account")).actors == []
        carol = await client.create("account", ["carol"], input={"owner": "Carol"})
        with pytest.raises(ActorExistsError):
            await client.create("account", ["carol"], input={"owner": "Mallory"})
        with pytest.raises(ActorExistsError):
            await env.client.create("account", ["carol"])
        assert (await carol.state()).owner == "Carol"
        assert env.failures == []


async def test_broadcasts_reach_a_long_polling_client_on_aws(moto: str) -> None:
    async with aws_api(moto) as (_, url), HttpClient(url, registry=registry, poll_wait=10) as client:
        board = client.get_or_create("progress", ["board"])
        await board.state()

        async def listen() -> list[tuple[int, str, int]]:
            seen = []
            async for record in board.events(after=0, follow=True):
                seen.append((record.seq, record.payload["stage"], record.payload["completed"]))
                if len(seen) == 4:
                    return seen
            return seen

        listener = asyncio.create_task(listen())
        for value in (1, 2):
            await board.send("jobs", {"value": value})
        assert await asyncio.wait_for(listener, 30) == [(1, "running", 0), (2, "completed", 1),
                                                        (3, "running", 1), (4, "completed", 2)]
        again = [r.seq async for r in board.events(after=2, follow=False)]
        assert again == [3, 4]  # from a cursor: no duplicates


async def test_a_request_survives_a_poller_restart_between_receive_and_complete(moto: str) -> None:
    worker = AwsTestEnv(registry, settings=_settings(moto), visibility_timeout=1, autorun=True)
    await worker.__aenter__()
    api = serve(create_app(registry, worker.settings))
    url = await api.__aenter__()
    try:
        async with HttpClient(url, registry=registry) as client:
            GATE.hang = True
            request = asyncio.create_task(client.get_or_create("hanger", ["h1"]).send(
                "jobs", {"value": 7}, wait=True, timeout=60, message_id="job-1"))
            await asyncio.wait_for(GATE.entered.wait(), 30)
            snapshot = await worker.store.load(client.get_or_create("hanger", ["h1"]).ref)
            assert snapshot is not None and snapshot.inbox == []
            assert {e.name: e.status for e in snapshot.history}["receipt"] == EntryStatus.COMPLETED
            GATE.hang = False
            await worker.__aexit__(None, None, None)  # the pollers stop; the hung wake-up is cancelled
            assert not request.done()
            async with AwsTestEnv(registry, store=worker.store, autorun=True) as restarted:
                # The wake-up message was never deleted: SQS hands it to the new poller.
                result = await asyncio.wait_for(request, 60)
                assert (result.status, result.response) == ("completed", {"result": 70})
                assert GATE.runs == 2
                assert (await client.get_or_create("hanger", ["h1"]).state()).received == 1
                await restarted.run_until_idle()
    finally:
        await api.__aexit__(None, None, None)


async def test_hostile_requests_leave_the_table_unchanged(moto: str) -> None:
    async with aws_api(moto, max_body_bytes=LIMIT) as (env, url):
        await seed(env)
        before = await scan(env)
        problems: list[str] = []
        for case in CASES:
            response = await raw_request(url, case.method, case.target, body=case.body, headers=case.headers)
            try:
                body = response.json()
            except ValueError:
                body = response.body
            _check(case, response.status, body, problems)
        await env.run_until_idle()
        assert problems == []
        assert await scan(env) == before


async def test_the_lambda_module_serves_requests_on_aws(moto: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with AwsTestEnv(registry, settings=_settings(moto), autorun=True) as env:
        for name, value in {"DORMANT_APP": "tests.api.apps:registry", "DORMANT_ENDPOINT_URL": moto,
                            "DORMANT_TABLE": env.settings.table, "DORMANT_QUEUE_URL": env.urls.wake,
                            "DORMANT_TIMER_QUEUE_URL": env.urls.timers, "DORMANT_INSPECTOR_TOKEN": TOKEN,
                            "DORMANT_AUTH_MODE": "none"}.items():  # the events carry no authorizer context
            monkeypatch.setenv(name, value)
        spec = importlib.util.spec_from_file_location("api_handler_on_aws", HANDLER_PATH)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)

        # A Lambda container: one thread, one event loop kept across invocations (Mangum drives it).
        container = ThreadPoolExecutor(max_workers=1)
        local = threading.local()

        def invoke(event: dict[str, Any]) -> dict[str, Any]:
            if not hasattr(local, "loop"):
                local.loop = asyncio.new_event_loop()
                asyncio.set_event_loop(local.loop)
            response: dict[str, Any] = module.handler(event, None)
            return response

        async def call(method: str, target: str, body: bytes | None = None, **headers: str) -> tuple[int, Any]:
            event = http_api_v2_event(method, target, body=body, headers={"content-type": "application/json",
                                                                          **headers}, base64_body=body is not None)
            response = await asyncio.get_running_loop().run_in_executor(container, invoke, event)
            return response["statusCode"], lambda_body(response)

        def request_threads() -> tuple[int, list[int]]:
            """The container's thread, and where its DynamoDB requests are made from now on (a hook on its client)."""
            service = local.loop.run_until_complete(module.app.state.services.get())
            made: list[int] = []
            service.store.client.meta.events.register("before-send.dynamodb",
                                                      lambda **_: made.append(threading.get_ident()))
            return threading.get_ident(), made

        try:
            assert await call("PUT", "/actors/request-response/lambda") == (
                201, {"actor": "request-response", "key": ["lambda"], "created": True})
            container_thread, made = await asyncio.get_running_loop().run_in_executor(container, request_threads)
            status, body = await call("POST", "/actors/request-response/lambda/queues/requests?wait=true&timeout=20",
                                      b'{"value": 21}')
            assert (status, body["status"], body["response"]) == (200, "completed", {"doubled": 42})
            # the invocation's requests on its own thread, not in a pool thread (dormant.core.clients.inline_calls)
            assert made and set(made) == {container_thread}
            assert await call("GET", "/actors/request-response/lambda/state") == (200, {"handled": 1})
            assert (await call("GET", "/actors/request-response/lambda/history"))[0] == 401
            assert (await call("GET", "/actors/request-response/lambda/history",
                               authorization=f"Bearer {TOKEN}"))[0] == 200
        finally:
            def close() -> None:
                if hasattr(local, "loop"):
                    local.loop.run_until_complete(module.app.state.services.aclose())
                    local.loop.close()
            await asyncio.get_running_loop().run_in_executor(container, close)
            container.shutdown(wait=True)
