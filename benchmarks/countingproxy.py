"""A counting HTTP proxy in front of an AWS endpoint: every DynamoDB and SQS request a process makes, by operation.

    proxy = CountingProxy("http://127.0.0.1:5000")   # the real endpoint (here: the dev stack's moto server)
    proxy.start()                                     # dormant dev --endpoint proxy.url
    before = proxy.snapshot(); ...; counted = proxy.snapshot() - before

For benchmarks/devstack.py: `dormant dev` pointed at the proxy makes every request through it (its API, its worker
and its pollers), so the counts are what the stack sends, measured outside it. Requests are told apart by their
`X-Amz-Target` header (the JSON protocols of DynamoDB and SQS); a ReceiveMessage that returned nothing is counted
apart (`sqs.ReceiveMessage (empty)`: polling), and so are the messages the others returned.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

HOP_HEADERS = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer"}
PREFIXES = {"DynamoDB_20120810": "dynamodb", "AmazonSQS": "sqs"}


class Counts(Counter[str]):
    """Requests by "service.Operation", plus "messages received" (what non-empty receives returned)."""

    def __sub__(self, other: Counter[str]) -> Counts:  # type: ignore[override]
        diff = Counts(self)
        diff.subtract(other)
        return Counts({key: value for key, value in diff.items() if value})


class CountingProxy:
    """Forwards every request to `upstream` and counts it (thread per connection, kept-alive both ways)."""

    def __init__(self, upstream: str, host: str = "127.0.0.1", port: int = 0) -> None:
        parsed = urlparse(upstream)
        self.upstream_host, self.upstream_port = parsed.hostname or "127.0.0.1", parsed.port or 80
        self.counts = Counts()
        self._lock = threading.Lock()
        self._local = threading.local()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:  # no line per request
                pass

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
                status, reason, response_headers, payload = proxy._forward(self.command, self.path, body, headers)
                proxy._count(self.headers.get("X-Amz-Target", ""), status, payload)
                self.send_response(status, reason)
                for key, value in response_headers:
                    if key.lower() not in HOP_HEADERS and key.lower() != "content-length":
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                try:
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the caller left (a long poll at shutdown)
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _relay

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_address[1]}"
        self._thread: threading.Thread | None = None

    def _connection(self) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=60)
            self._local.connection = connection
        return connection

    def _forward(self, method: str, path: str, body: bytes, headers: dict[str, str]
                 ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        for attempt in range(2):  # a kept-alive upstream connection may have been closed: one fresh try
            connection = self._connection()
            try:
                connection.request(method, path, body=body, headers=headers)
                response = connection.getresponse()
                return response.status, response.reason, response.getheaders(), response.read()
            except (http.client.HTTPException, OSError):
                connection.close()
                self._local.connection = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _count(self, target: str, status: int, payload: bytes) -> None:
        prefix, _, operation = target.partition(".")
        name = f"{PREFIXES.get(prefix, prefix or 'other')}.{operation or 'unknown'}"
        received = 0
        if name == "sqs.ReceiveMessage" and status == 200:
            try:
                received = len(json.loads(payload or b"{}").get("Messages") or [])
            except ValueError:
                received = 0
            if not received:
                name += " (empty)"
        with self._lock:
            self.counts[name] += 1
            if received:
                self.counts["messages received"] += received
            if status >= 400:
                self.counts[f"{name} -> {status}"] += 1

    def snapshot(self) -> Counts:
        with self._lock:
            return Counts(self.counts)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, name="counting-proxy", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
