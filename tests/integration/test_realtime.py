"""Realtime connections on the dev stack (docs/realtime.md): a WebSocket client subscribed to an actor is pushed its
events by the real worker (DynamoDB Local + moto SQS) through the stack's `@connections` endpoint, replays what it
missed with `after=`, and a dead connection is dropped without failing the wake-up."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import pytest_asyncio
import websockets

from dormant.core.realtime import Sequencer
from dormant.dev.stack import DevStack, free_port, run_dev_stack
from dormant.dynamodb.connections import Connections
from dormant.dynamodb.requests import Table
from dormant.http.client import HttpClient
from dormant.settings import Settings
from tests.realtime_app import registry
from tests.waiting import until_async

DEADLINE = 30.0  # a condition waited for, not a speed bound
BODY_LIMIT = 64 * 1024  # the stack's request body limit: an action's arguments over it are refused (413)
# One stack for the module (each test has actors of its own): starting one takes seconds.
pytestmark = pytest.mark.asyncio(loop_scope="module")


REGISTRY = registry


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(aws_endpoints: dict[str, str]) -> AsyncIterator[DevStack]:
    suffix = uuid.uuid4().hex[:8]
    settings = Settings(table=f"rt-{suffix}", queue_name=f"rt-{suffix}.fifo",  # type: ignore[call-arg]
                        timer_queue_name=f"rt-timers-{suffix}", max_body_bytes=BODY_LIMIT, **aws_endpoints)
    async with run_dev_stack(REGISTRY, port=free_port(), settings=settings) as running:
        yield running


def _socket_url(stack: DevStack) -> str:
    return stack.api_url.replace("http://", "ws://") + "/realtime"


async def _frame(socket: Any) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(await asyncio.wait_for(socket.recv(), DEADLINE))
    return frame


async def _subscribe(socket: Any, key: str, after: int) -> tuple[Sequencer, list[dict[str, Any]]]:
    """Subscribe; the events replayed (in order) until `subscribed`."""
    await socket.send(json.dumps({"type": "subscribe", "actor": "notes", "key": [key], "after": after}))
    sequencer, events = Sequencer(cursor=after), []
    while not sequencer.replayed:
        frame = await _frame(socket)
        assert frame["type"] in ("event", "subscribed"), frame
        events += sequencer.take(frame)
    return sequencer, events


async def _next_events(socket: Any, sequencer: Sequencer, count: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    while len(events) < count:
        events += sequencer.take(await _frame(socket))
        assert not sequencer.gap()
    return events


async def test_a_subscribed_client_is_pushed_a_steps_broadcast_without_polling(stack: DevStack) -> None:
    async with HttpClient(stack.api_url) as client:
        handle = client.get_or_create("notes", ["live"])
        await handle.send("notes", {"text": "first"})
        async with websockets.connect(_socket_url(stack)) as socket:
            sequencer, replayed = await _subscribe(socket, "live", 0)
            if not replayed:  # subscribed before the first note's commit: it comes live
                replayed = await _next_events(socket, sequencer, 1)
            assert [(e["seq"], e["name"], e["payload"]) for e in replayed] == [(1, "noted", {"text": "first"})]
            sent = time.monotonic()
            await handle.send("notes", {"text": "second"})
            [pushed] = await _next_events(socket, sequencer, 1)
            latency = time.monotonic() - sent
        assert (pushed["seq"], pushed["payload"], pushed["actor"], pushed["key"]) == (
            2, {"text": "second"}, "notes", ["live"])
        print(f"pushed {latency * 1000:.0f} ms after the send")  # measured (docs/realtime.md), not asserted


async def test_a_reconnect_with_after_gets_exactly_what_it_missed_then_live_ones(stack: DevStack) -> None:
    async with HttpClient(stack.api_url) as client:
        handle = client.get_or_create("notes", ["gap"])
        await handle.send("notes", {"text": "n1"})
        async with websockets.connect(_socket_url(stack)) as socket:
            sequencer, seen = await _subscribe(socket, "gap", 0)
            seen += [] if seen else await _next_events(socket, sequencer, 1)
        cursor = seen[-1]["seq"]
        for n in range(2, 7):  # five events while disconnected
            await handle.send("notes", {"text": f"n{n}"})
        async def all_sent() -> bool:
            return bool((await handle.state())["count"] >= 6)

        await until_async(all_sent, timeout=DEADLINE, what="the six notes were not all processed")
        async with websockets.connect(_socket_url(stack)) as socket:
            sequencer, missed = await _subscribe(socket, "gap", cursor)
            await handle.send("notes", {"text": "n7"})
            live = await _next_events(socket, sequencer, 1)
    assert [(e["seq"], e["payload"]["text"]) for e in missed] == [(n, f"n{n}") for n in range(2, 7)]
    assert [(e["seq"], e["payload"]["text"]) for e in live] == [(7, "n7")]


async def test_a_dead_connection_is_dropped_and_does_not_fail_the_wake_up(stack: DevStack) -> None:
    from aiobotocore.session import get_session  # type: ignore[import-untyped]

    async with HttpClient(stack.api_url) as client:
        handle = client.get_or_create("notes", ["dead"])
        await handle.send("notes", {"text": "one"})
        settings = stack.settings
        async with get_session().create_client("dynamodb", **settings.client_kwargs("dynamodb")) as dynamodb:
            connections = Connections(Table(dynamodb, settings.table), time.time)
            ref = handle.ref
            await connections.subscribe(ref, "gone-connection=", 0)  # never connected: @connections answers 410
            async with websockets.connect(_socket_url(stack)) as socket:
                sequencer, seen = await _subscribe(socket, "dead", 0)
                await handle.send("notes", {"text": "two"})
                seen += await _next_events(socket, sequencer, 2 - len(seen))
                assert [e["payload"]["text"] for e in seen] == ["one", "two"]  # the live one still pushed
                async def dropped() -> bool:
                    return "gone-connection=" not in [s.connection_id for s in await connections.of_actor(ref, 100)]

                await until_async(dropped, timeout=DEADLINE, what="the gone connection was not dropped")
                assert await connections.subscriptions_of("gone-connection=") == []
            status = await handle.status()
        assert status.error is None
        assert (await handle.state())["count"] == 2


async def test_handle_connect_pushes_events_to_callbacks_and_the_iterator_and_resumes_after_a_drop(
        stack: DevStack) -> None:
    import httpx

    async with HttpClient(stack.api_url) as client:
        handle = client.get_or_create("notes", ["client"])
        await handle.send("notes", {"text": "c1"})
        heard: list[Any] = []
        async with handle.connect(after=0).on("noted", heard.append) as connection:
            first = await asyncio.wait_for(anext(connection), DEADLINE)
            await handle.send("notes", {"text": "c2"})
            second = await asyncio.wait_for(anext(connection), DEADLINE)
            # The server drops the socket (as API Gateway does at 2 hours): the connection subscribes again from
            # its cursor, and what was committed meanwhile arrives once, in order.
            async with httpx.AsyncClient() as http:
                stored = await connections_of(stack, handle)
                assert len(stored) == 1
                assert (await http.delete(f"{stack.api_url}/@connections/{stored[0]}")).status_code == 204
            for n in (3, 4):
                await handle.send("notes", {"text": f"c{n}"})
            rest = [await asyncio.wait_for(anext(connection), DEADLINE) for _ in range(2)]
        events = [first, second, *rest]
        assert [(e.seq, e.payload["text"]) for e in events] == [(n, f"c{n}") for n in range(1, 5)]
        assert heard == [{"text": f"c{n}"} for n in range(1, 5)]
        assert connection.connects == 2 and connection.cursor == 4


async def connections_of(stack: DevStack, handle: Any) -> list[str]:
    from aiobotocore.session import get_session

    settings = stack.settings
    async with get_session().create_client("dynamodb", **settings.client_kwargs("dynamodb")) as dynamodb:
        found = await Connections(Table(dynamodb, settings.table), time.time).of_actor(handle.ref, 100)
    return [s.connection_id for s in found]


async def test_the_sync_connection_and_a_refused_subscription(stack: DevStack) -> None:
    from dormant.errors import ActorNotFoundError
    from dormant.http.client import SyncHttpClient

    def script() -> list[tuple[int, str]]:
        with SyncHttpClient(stack.api_url) as client:
            handle = client.get_or_create("notes", ["sync"])
            handle.send("notes", {"text": "s1"})
            with handle.connect() as connection:
                first = connection.next(DEADLINE)
                handle.send("notes", {"text": "s2"})
                second = connection.next(DEADLINE)
            with pytest.raises(ActorNotFoundError), client.get("notes", ["never-made"]).connect():
                pass
        return [(e.seq, e.payload["text"]) for e in (first, second)]

    assert await asyncio.to_thread(script) == [(1, "s1"), (2, "s2")]


def _lambda_event(kind: str, connection_id: str, body: str | None = None, **identity: str) -> dict[str, Any]:
    """What API Gateway's WebSocket API gives the function (the fields the handler reads)."""
    route = {"CONNECT": "$connect", "DISCONNECT": "$disconnect", "MESSAGE": "$default"}[kind]
    return {"requestContext": {"eventType": kind, "routeKey": route, "connectionId": connection_id,
                               "domainName": "example.execute-api.us-east-1.amazonaws.com", "stage": "dev",
                               "identity": identity},
            "body": body, "isBase64Encoded": False}


async def test_the_lambda_routes_record_the_caller_answer_frames_and_forget_the_connection(stack: DevStack) -> None:
    from aiobotocore.session import get_session

    from dormant.aws.realtime import LambdaRealtime, is_websocket_event

    settings = stack.settings  # DORMANT_REALTIME_URL: the dev stack's own @connections
    realtime = LambdaRealtime(REGISTRY, settings)
    async with HttpClient(stack.api_url) as client:
        handle = client.get_or_create("notes", ["lambda"])
        await handle.send("notes", {"text": "l1"})
        async with websockets.connect(_socket_url(stack)) as socket, \
                get_session().create_client("dynamodb", **settings.client_kwargs("dynamodb")) as dynamodb:
            await _subscribe(socket, "lambda", 0)
            connections = Connections(Table(dynamodb, settings.table), time.time)
            [live] = [s.connection_id for s in await connections.of_actor(handle.ref, 100)]
            arn = "arn:aws:iam::123456789012:user/ada"
            connect = _lambda_event("CONNECT", live, userArn=arn, accountId="123456789012")
            assert is_websocket_event(connect) and not is_websocket_event({"requestContext": {"http": {}}})
            assert await realtime.handle(connect) == {"statusCode": 200}
            assert json.loads(await connections.caller_of(live) or "{}")["id"] == arn
            # $default: the frame answered through the Management API, on the client's socket
            assert await realtime.handle(_lambda_event("MESSAGE", live, '{"type": "ping"}')) == {"statusCode": 200}
            assert await _answer(socket) == {"type": "pong"}
            unknown = '{"type": "subscribe", "actor": "nope", "key": ["a"]}'
            await realtime.handle(_lambda_event("MESSAGE", live, unknown))
            assert (await _answer(socket))["code"] == "unknown_actor"
            # not signed (no IAM principal): refused at $connect
            assert (await realtime.handle(_lambda_event("CONNECT", "other=")))["statusCode"] == 401
            assert await connections.caller_of("other=") is None
            assert await realtime.handle(_lambda_event("DISCONNECT", live)) == {"statusCode": 200}
            assert await connections.caller_of(live) is None and await connections.subscriptions_of(live) == []
    await realtime.aclose()


async def _answer(socket: Any) -> dict[str, Any]:
    """The next frame that is not an event (the first note's may come live after `subscribed`)."""
    while (frame := await _frame(socket))["type"] == "event":
        pass
    return frame


# -- actions over the socket (docs/realtime.md, "Actions"): the HTTP action route's path, answered in a frame -------
async def _act(socket: Any, frame: dict[str, Any]) -> dict[str, Any]:
    """Send an action frame; its `action_result` (events pushed meanwhile are skipped)."""
    await socket.send(json.dumps({"type": "action", **frame}))
    while (answer := await _frame(socket))["type"] != "action_result":
        pass
    assert answer["id"] == frame["id"]
    return answer


async def _http_error(stack: DevStack, key: str, action: str, args: Any, user: str = "dev") -> tuple[int, str]:
    import httpx

    async with httpx.AsyncClient() as http:
        response = await http.post(f"{stack.api_url}/actors/notes/{key}/actions/{action}", json=args,
                                   headers={"X-Dormant-Dev-User": user})
    return response.status_code, response.json()["error"]["code"]


async def test_an_action_over_the_socket_answers_as_over_http(stack: DevStack) -> None:
    async with HttpClient(stack.api_url) as client:
        handle = client.get_or_create("notes", ["act"])
        assert await handle.call("add", 2) == 2  # over HTTP (creates the actor)
        async with handle.connect() as connection:
            assert await connection.call("add", 3) == 5  # over the socket, the same state
            assert await connection.action("add", 4) == 9
        assert (await handle.state())["count"] == 9

    def script() -> int:
        from dormant.http.client import SyncHttpClient

        with SyncHttpClient(stack.api_url) as sync, sync.get_or_create("notes", ["act"]).connect() as connection:
            return int(connection.call("add", 1))

    assert await asyncio.to_thread(script) == 10


async def test_a_refused_action_over_the_socket_has_the_http_code_and_changes_nothing(stack: DevStack) -> None:
    from dormant.errors import ActorNotFoundError, ForbiddenError, InvalidArgumentsError, UnknownActionError

    big = "x" * (BODY_LIMIT + 1)
    cases = [  # (what, action, args, user)
        ("unknown action", "nope", [], "dev"),
        ("wrong types", "add", ["three"], "dev"),
        ("too many arguments", "add", [1, 2], "dev"),
        ("refused by the authorize hook", "add", [1], "mallory"),
        ("arguments over the body limit", "repeat", [big, 1], "dev"),
    ]
    codes: list[str] = []
    async with HttpClient(stack.api_url) as client:
        handle = client.get_or_create("notes", ["refused"])
        assert await handle.call("add", 1) == 1
        for n, (what, action, args, user) in enumerate(cases):
            status, code = await _http_error(stack, "refused", action, args, user)
            async with websockets.connect(_socket_url(stack) + f"?user={user}") as socket:
                answer = await _act(socket, {"id": n, "actor": "notes", "key": ["refused"], "name": action,
                                             "args": args})
                # on a key never made, the same refusal creates nothing
                fresh = await _act(socket, {"id": f"fresh-{n}", "actor": "notes", "key": [f"fresh-{n}"],
                                            "name": action, "args": args})
            assert answer["ok"] is False and fresh["ok"] is False, what
            assert (answer["error"]["status"], answer["error"]["code"]) == (status, code), what
            assert fresh["error"]["code"] == code, what
            with pytest.raises(ActorNotFoundError):
                await client.get("notes", [f"fresh-{n}"]).status()
            codes.append(code)
        assert (await handle.state())["count"] == 1  # nothing ran
        assert codes == ["unknown_action", "invalid_arguments", "invalid_arguments", "forbidden", "payload_too_large"]
        async with handle.connect() as connection:  # the client raises what handle.call raises
            with pytest.raises(UnknownActionError):
                await connection.call("nope")
            with pytest.raises(InvalidArgumentsError):
                await connection.call("add", "three")
            with pytest.raises(InvalidArgumentsError):  # as over HTTP
                await handle.call("add", "three")
        async with HttpClient(stack.api_url, headers={"X-Dormant-Dev-User": "mallory"}) as other:
            with pytest.raises(ForbiddenError):  # refused at the subscribe already (operation events)
                async with other.get_or_create("notes", ["refused"]).connect():
                    pass


async def test_a_result_too_big_for_a_frame_names_the_http_route_and_a_malformed_frame_is_invalid(
        stack: DevStack) -> None:
    async with HttpClient(stack.api_url) as client:
        handle = client.get_or_create("notes", ["big"])
        await handle.create()
        async with websockets.connect(_socket_url(stack)) as socket:
            answer = await _act(socket, {"id": "r", "actor": "notes", "key": ["big"], "name": "repeat",
                                         "args": ["y" * 1000, 130]})
            assert answer["ok"] is False and answer["error"]["code"] == "result_too_large"
            assert "POST /actors/{actor}/{key}/actions/repeat" in answer["error"]["message"]
            await socket.send(json.dumps({"type": "action", "actor": "notes", "key": ["big"], "name": "add"}))
            assert (await _frame(socket))["code"] == "invalid_frame"  # no correlation id: not an action frame
        assert len(await handle.call("repeat", "y" * 1000, 130)) == 130_000  # over HTTP it is answered
        async with websockets.connect(_socket_url(stack)) as socket:  # past API Gateway's 128 KB: closed (1009)
            await socket.send(json.dumps({"type": "action", "id": "huge", "actor": "notes", "key": ["big"],
                                          "name": "repeat", "args": ["z" * (130 * 1024), 1]}))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await _frame(socket)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


async def test_an_action_through_the_lambda_default_route_is_answered_on_the_socket(stack: DevStack) -> None:

    from dormant.aws.realtime import LambdaRealtime
    from dormant.http.actions import SocketActions

    settings = stack.settings
    realtime = LambdaRealtime(REGISTRY, settings, actions=lambda service: SocketActions(REGISTRY, settings, service))
    async with _lambda_connection(stack, "lambda-act") as (handle, socket, live):
        arn = "arn:aws:iam::123456789012:user/ada"
        assert await realtime.handle(_lambda_event("CONNECT", live, userArn=arn)) == {"statusCode": 200}
        frame = {"type": "action", "id": "a-1", "actor": "notes", "key": ["lambda-act"], "name": "add", "args": [2]}
        assert await realtime.handle(_lambda_event("MESSAGE", live, json.dumps(frame))) == {"statusCode": 200}
        assert await _answer(socket) == {"type": "action_result", "id": "a-1", "ok": True, "result": 7}
        assert (await handle.state())["count"] == 7
    await realtime.aclose()


@contextlib.asynccontextmanager
async def _lambda_connection(stack: DevStack, key: str) -> AsyncIterator[tuple[Any, Any, str]]:
    """A `notes` actor (its count at 5), a WebSocket subscribed to it, and that socket's connection id, which the
    Lambda routes' events name."""
    from aiobotocore.session import get_session

    async with HttpClient(stack.api_url) as client:
        handle = client.get_or_create("notes", [key])
        assert await handle.call("add", 5) == 5
        async with websockets.connect(_socket_url(stack)) as socket, \
                get_session().create_client("dynamodb", **stack.settings.client_kwargs("dynamodb")) as dynamodb:
            await _subscribe(socket, key, 0)
            connections = Connections(Table(dynamodb, stack.settings.table), time.time)
            [live] = [s.connection_id for s in await connections.of_actor(handle.ref, 100)]
            yield handle, socket, live


async def test_a_lambda_invocation_makes_its_requests_on_its_own_thread(stack: DevStack,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """With botocore's clients in threads (the API function's), a WebSocket event's DynamoDB requests are made on the
    thread that runs the invocation, as an HTTP invocation's are (dormant.core.clients.inline_calls): `$connect`, an
    action frame's load and commit, `$disconnect`. And `close()` lets the container's loop go."""
    from botocore.session import Session

    from dormant.aws.realtime import LambdaRealtime
    from dormant.http.actions import SocketActions

    made: list[int] = []  # the thread of each DynamoDB request of botocore's clients (the stack's: aiobotocore's)
    create_client = Session.create_client

    def noting(self: Session, service_name: str, *args: Any, **kwargs: Any) -> Any:
        client = create_client(self, service_name, *args, **kwargs)
        if service_name == "dynamodb":
            client.meta.events.register("before-send.dynamodb", lambda **_: made.append(threading.get_ident()))
        return client

    monkeypatch.setattr(Session, "create_client", noting)
    settings = stack.settings.model_copy(update={"aws_clients": "threads"})
    realtime = LambdaRealtime(REGISTRY, settings, actions=lambda service: SocketActions(REGISTRY, settings, service))
    container = ThreadPoolExecutor(max_workers=1)  # a Lambda container: one thread, its loop kept across events
    loop = asyncio.get_running_loop()

    async def invoke(event: dict[str, Any]) -> dict[str, Any]:
        response: dict[str, Any] = await loop.run_in_executor(container, realtime, event, None)
        return response

    try:
        async with _lambda_connection(stack, "lambda-thread") as (handle, socket, live):
            thread = await loop.run_in_executor(container, threading.get_ident)
            arn = "arn:aws:iam::123456789012:user/ada"
            assert await invoke(_lambda_event("CONNECT", live, userArn=arn)) == {"statusCode": 200}
            frame = {"type": "action", "id": "t-1", "actor": "notes", "key": ["lambda-thread"], "name": "add",
                     "args": [3]}
            assert await invoke(_lambda_event("MESSAGE", live, json.dumps(frame))) == {"statusCode": 200}
            assert await _answer(socket) == {"type": "action_result", "id": "t-1", "ok": True, "result": 8}
            assert await invoke(_lambda_event("DISCONNECT", live)) == {"statusCode": 200}
            assert (await handle.state())["count"] == 8
        assert len(made) >= 4 and set(made) == {thread}  # (at least the caller's put, a load, a commit, the drop)
    finally:
        await loop.run_in_executor(container, realtime.close)
        container.shutdown()
