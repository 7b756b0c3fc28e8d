"""Responses too big for the function that serves them: handed out through S3.

A Lambda function answers at most 6 MB (the whole response event); a bigger one would reach the caller as API
Gateway's bare 502. With values of any size in the store (docs/limits.md), a state or a history can be bigger than
that. So on Lambda (`Settings.max_response_bytes`, which functions/api/handler.py sets), a response whose body is
over the limit is written to S3 under `ephemeral/responses/` (expired by the bucket's lifecycle rule) and answered
with `303 See Other` to a presigned GET URL valid for `PRESIGNED_SECONDS`. Clients follow it (the Python
`HttpClient` does; the URL carries its own authorization, and a client drops its own on the way there). Without a
bucket the answer is 413 `response_too_large`, saying what to read instead.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("dormant.http.large_responses")
PRESIGNED_SECONDS = 900
LAMBDA_RESPONSE_BYTES = 6_000_000  # Lambda's 6,291,456-byte response, less the event's envelope and headers
RESPONSES_PREFIX = "ephemeral/responses/"

BlobsGetter = Callable[[], Awaitable[Any]]  # -> dormant.s3.blobs.S3Blobs or None


class LargeResponses:
    """ASGI middleware: responses over `limit` bytes go through S3 (see the module docstring)."""

    def __init__(self, app: ASGIApp, limit: int, blobs: BlobsGetter) -> None:
        self.app = app
        self.limit = limit
        self._blobs = blobs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _Buffer(self, send).send)

    async def _finish(self, start: Message | None, body: bytes, send: Send) -> None:
        assert start is not None
        if len(body) <= self.limit:
            await send(start)
            await send({"type": "http.response.body", "body": body})
            return
        blobs = await self._blobs()
        if blobs is None:
            await _json(send, 413, {"error": {
                "code": "response_too_large",
                "message": f"the response is {len(body):,} bytes; this API answers at most {self.limit:,} "
                           "(Lambda's response limit) and has no bucket to hand it out through "
                           "(DORMANT_BUCKET). Read it in process (dormant.client) or export it"}})
            return
        key = f"{RESPONSES_PREFIX}{uuid.uuid4().hex}.json"
        content_type = next((value.decode() for name, value in start.get("headers", [])
                             if name.lower() == b"content-type"), "application/json")
        await blobs.client.put_object(Bucket=blobs.bucket, Key=key, Body=body, ContentType=content_type)
        url = await blobs.client.generate_presigned_url(
            "get_object", Params={"Bucket": blobs.bucket, "Key": key}, ExpiresIn=PRESIGNED_SECONDS)
        log.info("a response of %d bytes handed out through S3 (%s)", len(body), key)
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", str(url).encode()), (b"content-length", b"0"),
                                (b"cache-control", b"no-store")]})
        await send({"type": "http.response.body", "body": b""})


class _Buffer:
    """One response on its way out: passed through when its declared length is within the limit, else held."""

    def __init__(self, middleware: LargeResponses, downstream: Send) -> None:
        self._middleware = middleware
        self._downstream = downstream
        self._start: Message | None = None
        self._body = bytearray()
        self._passing = False

    async def send(self, message: Message) -> None:
        if self._passing:
            await self._downstream(message)
        elif message["type"] == "http.response.start":
            declared = _content_length(message)
            if declared is not None and declared <= self._middleware.limit:
                self._passing = True
                await self._downstream(message)
            else:
                self._start = message
        elif message["type"] == "http.response.body":
            self._body += message.get("body", b"")
            if not message.get("more_body"):
                await self._middleware._finish(self._start, bytes(self._body), self._downstream)
        else:
            await self._downstream(message)


def _content_length(start: Message | None) -> int | None:
    for name, value in (start or {}).get("headers", []):
        if name.lower() == b"content-length" and value.isdigit():
            return int(value)
    return None


async def _json(send: Send, status: int, payload: dict[str, Any]) -> None:
    data = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})
