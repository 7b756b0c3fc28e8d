"""A fault-injecting HTTP proxy for AWS-compatible servers (tests only).

Put it between the code and a moto server (`endpoint_url=proxy.url`): every request is forwarded unchanged
unless `proxy.rule(operation, body)` says otherwise, where `operation` is the request's `X-Amz-Target`
("DynamoDB_20120810.PutItem", "AmazonSQS.SendMessage", ...):

- "pass": forwarded;
- "reset": the connection is closed without an answer (a network failure; botocore retries, then fails);
- "hang": the connection is held open, unanswered, until the client gives up (a black hole);
- "unavailable": answered `503 ServiceUnavailable` without reaching the server.

`proxy.counts` tallies what happened per (operation, outcome). Runs on the test's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable
from typing import Literal

Outcome = Literal["pass", "reset", "hang", "unavailable"]
Rule = Callable[[str, bytes], Outcome]
_UNAVAILABLE = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/x-amz-json-1.0\r\n"
                b"Content-Length: 65\r\nConnection: close\r\n\r\n"
                b'{"__type":"ServiceUnavailable","message":"injected by faultproxy"}')


def passing(operation: str, body: bytes) -> Outcome:
    return "pass"


class FaultProxy:
    """See the module docstring. `async with FaultProxy(upstream) as proxy: ... proxy.rule = ...`"""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.removeprefix("http://").partition(":")
        self.upstream = (host, int(port or 80))
        self.rule: Rule = passing
        self.counts: Counter[tuple[str, str]] = Counter()
        self.url = ""
        self._server: asyncio.base_events.Server | None = None
        self._held: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *_: object) -> None:
        for writer in list(self._held):
            writer.close()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    def outcomes(self, prefix: str) -> Counter[str]:
        """Outcomes of the operations starting with `prefix` ("AmazonSQS", "DynamoDB_20120810.PutItem")."""
        tally: Counter[str] = Counter()
        for (operation, outcome), count in self.counts.items():
            if operation.startswith(prefix):
                tally[outcome] += count
        return tally

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                head, body, operation = request
                outcome = self.rule(operation, body)
                self.counts[(operation, outcome)] += 1
                if outcome == "reset":
                    return
                if outcome == "hang":
                    self._held.add(writer)
                    await reader.read()  # until the client closes it
                    return
                if outcome == "unavailable":
                    writer.write(_UNAVAILABLE)
                    await writer.drain()
                    return
                writer.write(await self._forward(head, body))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._held.discard(writer)
            writer.close()

    async def _forward(self, head: bytes, body: bytes) -> bytes:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        try:
            lines = head.split(b"\r\n")
            kept = [line for line in lines[1:] if line and not line.lower().startswith(b"connection:")]
            up_writer.write(b"\r\n".join([lines[0], *kept, b"Connection: close", b"", b""]) + body)
            await up_writer.drain()
            response = await up_reader.read()
        finally:
            up_writer.close()
        response_head, _, response_body = response.partition(b"\r\n\r\n")
        if b"transfer-encoding: chunked" in response_head.lower():
            response_body = _unchunk(response_body)
        response_lines = [line for line in response_head.split(b"\r\n")
                          if not line.lower().startswith((b"connection:", b"content-length:",
                                                          b"transfer-encoding:"))]
        response_lines.append(b"Content-Length: " + str(len(response_body)).encode())
        return b"\r\n".join(response_lines) + b"\r\n\r\n" + response_body


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes, str] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = 0
    operation = ""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or 0)
        elif name.strip().lower() == b"x-amz-target":
            operation = value.strip().decode()
    body = await reader.readexactly(length) if length else b""
    return head[:-4], body, operation


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2:]
    return bytes(out)
