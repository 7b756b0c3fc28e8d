"""The dev stack's WebSocket API in auth mode jwt (docs/realtime.md, "Auth at $connect"): the handshake's bearer token
is checked by the `$connect` authorizer's verifier (dormant.aws.authorizer) against a local issuer's JWKS; a good token
connects, receives events and calls actions as its `jwt` caller; a bad one is refused the handshake and stores
nothing."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import pytest_asyncio
import websockets
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from dormant.dev.stack import DevStack, free_port, run_dev_stack
from dormant.dynamodb.connections import Connections
from dormant.dynamodb.requests import Table
from dormant.http.client import HttpClient
from dormant.http.signing import BearerToken
from dormant.settings import Settings
from tests.realtime_app import registry

DEADLINE = 30.0  # a condition waited for, not a speed bound
AUDIENCE = "dormant-app"
KEY = RSAKey.generate_key(2048, parameters={"kid": "dev-key"})
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    """An OpenID issuer on localhost: its discovery document and JWKS (what API Gateway's JWT authorizer reads)."""
    served: dict[str, bytes] = {}

    class Documents(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = served.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body or b"{}")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Documents)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    served["/.well-known/openid-configuration"] = json.dumps({"issuer": url, "jwks_uri": f"{url}/jwks"}).encode()
    served["/jwks"] = json.dumps(KeySet([KEY]).as_dict(private=False)).encode()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield url
    server.shutdown()
    thread.join()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(aws_endpoints: dict[str, str], issuer: str) -> AsyncIterator[DevStack]:
    suffix = uuid.uuid4().hex[:8]
    settings = Settings(table=f"rtj-{suffix}", queue_name=f"rtj-{suffix}.fifo",  # type: ignore[call-arg]
                        timer_queue_name=f"rtj-timers-{suffix}", auth_mode="jwt", jwt_issuer=issuer,
                        jwt_audience=AUDIENCE, **aws_endpoints)
    async with run_dev_stack(registry, port=free_port(), settings=settings) as running:
        yield running


def token(issuer: str, **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": issuer, "aud": AUDIENCE, "sub": "ada", "exp": now + 600, "iat": now, **claims}
    return jwt.encode({"alg": "RS256", "kid": "dev-key"}, body, KEY)


def socket_url(stack: DevStack) -> str:
    return stack.api_url.replace("http://", "ws://") + "/realtime"


async def frame(socket: Any) -> dict[str, Any]:
    received: dict[str, Any] = json.loads(await asyncio.wait_for(socket.recv(), DEADLINE))
    return received


async def test_a_good_token_connects_receives_events_and_calls_actions_as_its_subject(
        stack: DevStack, issuer: str) -> None:
    async with HttpClient(stack.api_url, auth=BearerToken(token(issuer))) as client:
        handle = client.get_or_create("notes", ["jwt"])
        await handle.send("notes", {"text": "one"})
        async with handle.connect() as connection:  # Authorization: Bearer on the handshake
            first = await asyncio.wait_for(anext(connection), DEADLINE)
            await handle.send("notes", {"text": "two"})
            second = await asyncio.wait_for(anext(connection), DEADLINE)
            assert await connection.call("add", 5) == 7
            assert await connection.call("who") == ["jwt", "ada"]  # the token's subject, as the HTTP API's caller
        assert [(e.seq, e.payload["text"]) for e in (first, second)] == [(1, "one"), (2, "two")]
    # the token in the query string (a browser cannot set headers on the handshake)
    async with websockets.connect(socket_url(stack) + f"?token={token(issuer)}") as socket:
        await socket.send(json.dumps({"type": "subscribe", "actor": "notes", "key": ["jwt"], "after": 2}))
        assert (await frame(socket))["type"] == "subscribed"


@pytest.mark.parametrize("case", ["expired", "another audience", "another issuer", "garbage", "none"])
async def test_a_bad_token_is_refused_at_the_handshake_and_stores_nothing(
        stack: DevStack, issuer: str, case: str) -> None:
    from aiobotocore.session import get_session  # type: ignore[import-untyped]

    bad = {"expired": lambda: token(issuer, exp=int(time.time()) - 10),
           "another audience": lambda: token(issuer, aud="someone-else"),
           "another issuer": lambda: token(issuer, iss="https://elsewhere.example"),
           "garbage": lambda: "not.a.token", "none": lambda: None}[case]()
    headers = {"Authorization": f"Bearer {bad}"} if bad is not None else {}
    key = f"refused-{case.replace(' ', '-')}"
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(socket_url(stack), additional_headers=headers) as socket:
            await socket.send(json.dumps({"type": "subscribe", "actor": "notes", "key": [key]}))
    assert refused.value.response.status_code == 403
    settings = stack.settings
    async with get_session().create_client("dynamodb", **settings.client_kwargs("dynamodb")) as dynamodb:
        connections = Connections(Table(dynamodb, settings.table), time.time)
        from dormant.ports import ActorRef

        assert await connections.of_actor(ActorRef(name="notes", key=(key,)), 100) == []
