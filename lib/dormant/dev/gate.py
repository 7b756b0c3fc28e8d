"""WSGI middleware in front of moto: one request at a time per service, long polls that never block it,
and the persistence hooks.

- **Serialized.** moto's conditional writes are not atomic under concurrent requests (two commits of one
  version could both succeed), and its SQS state is not safe either (under load FIFO groups were left with
  visible messages that ReceiveMessage never returned). Nor is its S3: PutObject's If-None-Match is checked
  before the put, apart from it (with 6 concurrent 16 MB puts of one new name, 4 rounds in 15 had several
  winners), and a put that replaces an object closes the old one's buffer while another request still reads it
  (HTTP 500 "read of closed file"). DynamoDB requests run one at a time under one lock, SQS requests under
  another, S3 requests under a third (an S3 write's body is read before it waits for the lock); table-, queue- and
  bucket-level changes take all three (and compact the data directory).
- **Long polls outside the lock.** A ReceiveMessage that may wait is run as short polls (WaitTimeSeconds=0)
  under the lock, and between them waits *outside* it on a condition that every SQS change notifies (or
  `poll_interval`, for delays and visibility timeouts that expire by themselves). A poller therefore sees
  a message the moment it is sent or its FIFO group is unlocked, and a long poll never stalls other requests.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode

from dormant.dev.persistence import Persistence

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

DYNAMODB_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems", "DescribeTable",
                            "ListTables", "DescribeTimeToLive", "DescribeContinuousBackups", "ListTagsOfResource",
                            "DescribeEndpoints", "DescribeLimits"})
DYNAMODB_ITEM_WRITES = frozenset({"PutItem", "DeleteItem", "UpdateItem", "BatchWriteItem", "TransactWriteItems"})
SQS_READS = frozenset({"GetQueueUrl", "ListQueues", "GetQueueAttributes", "ListQueueTags",
                       "ListDeadLetterSourceQueues"})
SQS_MESSAGE_OPS = frozenset({"SendMessage", "SendMessageBatch", "DeleteMessage", "DeleteMessageBatch",
                             "ReceiveMessage", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch"})
SERVICES = ("dynamodb", "sqs", "s3")  # the order their locks are taken in
S3_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def classify(environ: dict[str, Any]) -> tuple[str | None, str]:
    """(service, action) of a request: "dynamodb"/"sqs" and the operation name, "s3" and its kind (`s3_kind`), or
    (None, path)."""
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if target.startswith("DynamoDB_"):
        return "dynamodb", target.rpartition(".")[2]
    if target.startswith("AmazonSQS."):
        return "sqs", target.rpartition(".")[2]
    authorization = environ.get("HTTP_AUTHORIZATION", "")
    if "/sqs/aws4_request" in authorization:  # the older query protocol
        body = _read_body(environ)
        return "sqs", dict(parse_qsl(body.decode(errors="replace"))).get("Action", "")
    if "/s3/aws4_request" in authorization and not _s3_control(environ):
        return "s3", s3_kind(environ)  # (presigned and unsigned requests: RequestGate asks moto's dispatcher)
    return None, environ.get("PATH_INFO", "")


def _s3_control(environ: dict[str, Any]) -> bool:
    """S3 Control (another moto app, unserialized as moto serves it), signed as s3 too."""
    return bool(environ.get("PATH_INFO", "").startswith("/v20180820/") or "s3-control" in environ.get("HTTP_HOST", ""))


def s3_kind(environ: dict[str, Any]) -> str:
    """"read" (GET, HEAD), "object" (a write to an object name or upload: PUT/POST/DELETE with a key, and the batch
    delete POST /bucket?delete) or "bucket" (any other write: a bucket's creation, deletion or settings)."""
    from moto.s3.responses import S3Response

    if environ.get("REQUEST_METHOD", "GET") in S3_READ_METHODS:
        return "read"
    path = environ.get("PATH_INFO", "")
    host = environ.get("HTTP_HOST", "")
    if S3Response.subdomain_based_buckets(SimpleNamespace(headers={"host": host}, url=f"http://{host}{path}")):
        key = path.lstrip("/")  # the bucket is in the host name
    else:
        key = path.lstrip("/").partition("/")[2]
    if key or "delete" in parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True):
        return "object"
    return "bucket"


def _read_body(environ: dict[str, Any]) -> bytes:
    """The request body, left readable for the app."""
    cached = environ.get("dormant.body")
    if cached is not None:
        return bytes(cached)
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    _set_body(environ, body)
    return bytes(body)


def _prefetch_body(environ: dict[str, Any]) -> None:
    """Read a request body of known length now, so a slow upload never holds a lock (chunked ones are left to moto)."""
    if environ.get("CONTENT_LENGTH") and "chunked" not in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        _read_body(environ)


def _set_body(environ: dict[str, Any], body: bytes) -> None:
    environ["dormant.body"] = body
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))


class Captured:
    """A WSGI response held until it is passed on."""

    def __init__(self) -> None:
        self.status = "500 INTERNAL SERVER ERROR"
        self.headers: list[tuple[str, str]] = []
        self.body = b""

    def start_response(self, status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[..., Any]:
        self.status, self.headers = status, list(headers)
        return lambda data: None

    @property
    def ok(self) -> bool:
        return self.status.startswith("2")

    def send(self, start_response: Callable[..., Any]) -> list[bytes]:
        start_response(self.status, self.headers)
        return [self.body]


class RequestGate:
    """The middleware (see the module docstring). `stop()` ends waiting long polls at once."""

    def __init__(self, app: WsgiApp, persistence: Persistence | None = None, *, poll_interval: float = 0.25) -> None:
        self.app = app
        self.persistence = persistence
        self.poll_interval = poll_interval
        self.locks = {service: threading.Lock() for service in SERVICES}
        self._service_apps: dict[str, WsgiApp] = {}
        self._changed = threading.Condition()
        self._changes = 0
        self._stopping = False

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        service, action = classify(environ)
        if service is None:
            if action.startswith("/moto-api/reset"):
                return self._run(SERVICES, None, action, environ).send(start_response)
            lookup = getattr(self.app, "get_application", None)
            app = lookup(environ) if lookup is not None else self.app
            if getattr(app, "service", None) != "s3":
                return app(environ, start_response)  # moto's dashboard and other services: as moto serves them
            service, action = "s3", s3_kind(environ)  # an unsigned S3 request (moto's default service)
        if service == "sqs" and action == "ReceiveMessage":
            return self._receive(environ).send(start_response)
        if service == "s3":
            structural = action == "bucket"
            if action != "read":
                _prefetch_body(environ)
        else:
            structural = action not in (DYNAMODB_READS | DYNAMODB_ITEM_WRITES if service == "dynamodb"
                                        else SQS_READS | SQS_MESSAGE_OPS)
        return self._run(SERVICES if structural else (service,), service, action, environ).send(start_response)

    def _run(self, services: Iterable[str], service: str | None, action: str, environ: dict[str, Any]) -> Captured:
        captured = Captured()
        locks = [self.locks[name] for name in SERVICES if name in services]  # always the same order
        for lock in locks:
            lock.acquire()
        compact = False
        try:
            if self.persistence is not None:
                self.persistence.before_request()
            captured.body = b"".join(self._app_for(service, environ)(environ, captured.start_response))
            if self.persistence is not None:
                compact = self._persist(service, action, captured.ok, whole=len(locks) == len(SERVICES))
        finally:
            for lock in reversed(locks):
                lock.release()
        if compact:
            self.compact()
        if service == "sqs" and action not in SQS_READS and action != "ReceiveMessage":
            # A receive hides messages (nothing new to see); a send, delete or visibility change may show some.
            with self._changed:
                self._changes += 1
                self._changed.notify_all()
        return captured

    def _app_for(self, service: str | None, environ: dict[str, Any]) -> WsgiApp:
        """moto's app for this service, looked up once: moto's dispatcher works out the service of every request
        again (scanning its list of modules), which cost a tenth of the server's CPU."""
        lookup = getattr(self.app, "get_application", None)
        if service is None or lookup is None:
            return self.app
        app = self._service_apps.get(service)
        if app is None:
            app = self._service_apps[service] = lookup(environ)
        return app

    def _persist(self, service: str | None, action: str, ok: bool, *, whole: bool) -> bool:
        """Journal what the request changed; True when the data directory should be compacted now."""
        persistence = self.persistence
        assert persistence is not None
        if whole:  # a table- or queue-level change (or a reset): the journal cannot describe it, snapshot
            persistence.touched.take()
            if ok:
                persistence.compact()
            return False
        if service == "dynamodb":
            if ok and action in DYNAMODB_ITEM_WRITES:
                persistence.after_dynamodb()
            else:
                persistence.touched.take()
        elif service == "sqs" and action in SQS_MESSAGE_OPS:
            persistence.after_sqs()
        elif service == "s3":
            if action == "object":
                persistence.after_s3(ok)
            else:
                persistence.s3_touched.take()
        return persistence.wants_compaction

    def compact(self) -> None:
        """A snapshot of everything, with every lock held (requests wait meanwhile)."""
        if self.persistence is None:
            return
        locks = [self.locks[name] for name in SERVICES]
        for lock in locks:
            lock.acquire()
        try:
            if self.persistence.wants_compaction:
                self.persistence.compact()
        finally:
            for lock in reversed(locks):
                lock.release()

    def _receive(self, environ: dict[str, Any]) -> Captured:
        body = _read_body(environ)
        json_protocol = "HTTP_X_AMZ_TARGET" in environ
        params: dict[str, Any] = json.loads(body or b"{}") if json_protocol else dict(parse_qsl(body.decode()))
        wait = _wait_seconds(params)
        params["WaitTimeSeconds"] = 0
        _set_body(environ, json.dumps(params).encode() if json_protocol else urlencode(params).encode())
        deadline = time.monotonic() + wait
        while True:
            with self._changed:
                seen = self._changes
            environ["wsgi.input"] = io.BytesIO(environ["dormant.body"])
            captured = self._run(("sqs",), "sqs", "ReceiveMessage", environ)
            remaining = deadline - time.monotonic()
            if not captured.ok or remaining <= 0 or self._stopping or _has_messages(captured.body, json_protocol):
                return captured
            self._wait_for_change(seen, min(self.poll_interval, remaining))

    def _wait_for_change(self, seen: int, timeout: float) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._changes != seen or self._stopping, timeout=timeout)

    def stop(self) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify_all()


def _wait_seconds(params: dict[str, Any]) -> float:
    """The poll's wait: its WaitTimeSeconds, else the queue's ReceiveMessageWaitTimeSeconds (SQS caps both at 20)."""
    given = params.get("WaitTimeSeconds")
    if given is None:
        given = _queue_default_wait(str(params.get("QueueUrl", "")))
    try:
        return max(0.0, min(20.0, float(given)))
    except (TypeError, ValueError):
        return 0.0


def _queue_default_wait(queue_url: str) -> Any:
    from moto.sqs.models import sqs_backends

    name = queue_url.rstrip("/").rpartition("/")[2]
    for regions in dict.values(sqs_backends):
        for backend in dict.values(regions):
            queue = backend.queues.get(name)
            if queue is not None:
                return getattr(queue, "receive_message_wait_time_seconds", 0)
    return 0


def _has_messages(body: bytes, json_protocol: bool) -> bool:
    if not json_protocol:
        return b"<Message>" in body
    try:
        return bool(json.loads(body or b"{}").get("Messages"))
    except ValueError:
        return True  # not ours to judge: pass it on
