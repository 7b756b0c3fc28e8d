"""Helpers for the API tests: uvicorn in the test's event loop, raw HTTP requests, store dumps,
Mangum with hand-built API Gateway events."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import dataclasses
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import uvicorn
from fastapi import FastAPI

from dormant.memory.store import MemoryEventStore

TOKEN = "s3cret-token"


@asynccontextmanager
async def serve(app: FastAPI) -> AsyncIterator[str]:
    """Serve `app` with uvicorn on 127.0.0.1 (a free port) in the running event loop; yields the base URL.

    Same loop as the test: the in-memory store's conditions and the TestEnv runner work across it."""
    # A short graceful-shutdown timeout: long-polls still open at teardown are cancelled after it.
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]  # pytest owns signals
    task = asyncio.get_running_loop().create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()  # startup failed: raise its error
        await asyncio.sleep(0.005)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


def dump_store(store: MemoryEventStore) -> dict[str, Any]:
    """Everything the in-memory store holds (actors, early inboxes), as a deep copy to compare."""
    return copy.deepcopy({
        "actors": {k: dataclasses.asdict(v) for k, v in store._actors.items()},
        "early": {k: dataclasses.asdict(v) for k, v in store._early.items()},
    })


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


async def raw_request(base_url: str, method: str, target: str, *, body: bytes = b"",
                      headers: Mapping[str, str] | None = None) -> RawResponse:
    """One HTTP/1.1 request with the request target sent byte for byte (no client normalises `..` or %2F)."""
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = {"Host": f"{host}:{port}", "Connection": "close"}
    given = {k.lower() for k in headers or {}}
    if (body or method in ("POST", "PUT")) and not given & {"content-length", "transfer-encoding"}:
        head["Content-Length"] = str(len(body))
    head.update(headers or {})
    lines = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in head.items()), "", ""]
    writer.write("\r\n".join(lines).encode("latin-1") + body)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    head_bytes, _, payload = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head_bytes.decode("latin-1").split("\r\n")
    response_headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        response_headers[name.strip().lower()] = value.strip()
    if response_headers.get("transfer-encoding") == "chunked":
        payload = _unchunk(payload)
    return RawResponse(int(status_line.split()[1]), response_headers, payload)


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2:]
    return bytes(out)


# -- API Gateway events --------------------------------------------------------------------------------
def http_api_v2_event(method: str, target: str, *, body: bytes | None = None, headers: Mapping[str, str] | None = None,
                      base64_body: bool = False) -> dict[str, Any]:
    """An API Gateway HTTP API (payload v2.0) event, as the Lambda integration receives it."""
    path, _, query = target.partition("?")
    all_headers = {"host": "abc123.execute-api.us-east-1.amazonaws.com", "user-agent": "pytest",
                   "x-forwarded-proto": "https", "x-forwarded-port": "443", **{k.lower(): v for k, v in
                                                                                (headers or {}).items()}}
    event: dict[str, Any] = {
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": query,
        "headers": all_headers,
        "requestContext": {
            "accountId": "123456789012", "apiId": "abc123", "domainName": all_headers["host"],
            "domainPrefix": "abc123", "requestId": "req-1", "routeKey": "$default", "stage": "$default",
            "time": "30/Nov/2026:09:00:00 +0000", "timeEpoch": 1796029200000,
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "203.0.113.7",
                     "userAgent": "pytest"},
        },
        "isBase64Encoded": base64_body,
    }
    if query:
        event["queryStringParameters"] = {k: ",".join(v) for k, v in parse_qs(query).items()}
    if body is not None:
        try:
            text = None if base64_body else body.decode()
        except UnicodeDecodeError:
            text = None  # API Gateway base64-encodes bodies that are not text
        event["isBase64Encoded"] = text is None
        event["body"] = base64.b64encode(body).decode() if text is None else text
    return event


def rest_v1_event(method: str, target: str, *, body: bytes | None = None, headers: Mapping[str, str] | None = None,
                  base64_body: bool = False) -> dict[str, Any]:
    """An API Gateway REST API (payload v1.0, proxy integration) event."""
    path, _, query = target.partition("?")
    all_headers = {"Host": "abc123.execute-api.us-east-1.amazonaws.com", "User-Agent": "pytest",
                   "X-Forwarded-Proto": "https", "X-Forwarded-Port": "443", **dict(headers or {})}
    multi = parse_qs(query) if query else None
    return {
        "resource": "/{proxy+}", "path": path, "httpMethod": method,
        "headers": all_headers, "multiValueHeaders": {k: [v] for k, v in all_headers.items()},
        "queryStringParameters": {k: v[-1] for k, v in multi.items()} if multi else None,
        "multiValueQueryStringParameters": multi,
        "pathParameters": {"proxy": path.lstrip("/")}, "stageVariables": None,
        "requestContext": {"resourcePath": "/{proxy+}", "httpMethod": method, "path": f"/prod{path}",
                           "stage": "prod", "requestId": "req-1", "accountId": "123456789012",
                           "identity": {"sourceIp": "203.0.113.7", "userAgent": "pytest"}},
        "body": (base64.b64encode(body).decode() if base64_body else body.decode()) if body is not None else None,
        "isBase64Encoded": base64_body,
    }


def lambda_body(response: Mapping[str, Any]) -> Any:
    """The JSON body of a Mangum response."""
    raw = response.get("body", "")
    data = base64.b64decode(raw) if response.get("isBase64Encoded") else raw.encode()
    return json.loads(data) if data else None


@dataclass
class MangumHarness:
    """A TestEnv on a private event loop set as the thread's current loop, and the app behind Mangum:
    `handler(event, context)` runs exactly as in the API Lambda (Mangum drives the current loop)."""

    env: Any
    handler: Any
    loop: asyncio.AbstractEventLoop

    def run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(awaitable)


@contextlib.contextmanager
def mangum_harness(registry: Any, settings: Any) -> Iterator[MangumHarness]:
    from mangum import Mangum

    from dormant.http.app import create_app
    from dormant.testing import TestEnv

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        env = TestEnv(registry)
        loop.run_until_complete(env.__aenter__())
        handler = Mangum(create_app(registry, settings, service=env.service), lifespan="off")
        try:
            yield MangumHarness(env, handler, loop)
        finally:
            loop.run_until_complete(env.__aexit__(None, None, None))
    finally:
        asyncio.set_event_loop(None)
        loop.close()


@asynccontextmanager
async def served_env(registry: Any, settings: Any = None) -> AsyncIterator[tuple[Any, str]]:
    """A TestEnv and uvicorn serving the API over it: yields (env, base URL)."""
    from dormant.http.app import create_app
    from dormant.settings import Settings
    from dormant.testing import TestEnv

    async with TestEnv(registry) as env, \
            serve(create_app(registry, settings or Settings(dev=True), service=env.service)) as url:
        yield env, url
