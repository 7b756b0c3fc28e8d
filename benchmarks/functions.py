"""The deployment in one process, for pricing: what AWS bills, counted and timed on the real pieces.

- **DynamoDB**: DynamoDB Local (AWS's own emulator), which reports the capacity each request consumed by AWS's
  rules, indexes included: every request asks for it (`ReturnConsumedCapacity=INDEXES`).
- **SQS**: the embedded moto server of `dormant dev` (a child process).
- **The two Lambda functions**: functions/api/handler.py and functions/worker/handler.py themselves, imported
  as Lambda imports them (environment, init phase, botocore's clients in threads, powertools logs and EMF
  metrics), each in its own thread, the way a container runs one invocation at a time. Every invocation is
  timed (billed duration: wall time rounded up to the millisecond) and its log output is counted.
- **API Gateway**: an httpx transport that turns each request of `dormant.http.client.HttpClient` into an HTTP
  API (payload 2.0) event for the API function, as the `$default` route with IAM authorization does; every
  request counts as an API Gateway request, with its bytes and its access-log line (template.yaml's format).
- **The SQS event sources**: `EventSource`, one per queue, as Lambda's pollers run an event source mapping: a long
  poll (WaitTimeSeconds 20) always open while idle, so a message is handed to the worker as soon as it arrives, then
  the batch gathered with the batch size and batching window of template.yaml (or a lever's); receives and deletes
  through `dormant.sqs.poller.SqsPoller` (billed SQS requests).

The API and the worker run in one process here; on AWS they are separate containers, so the worker's commit
cannot wake a waiting API request (`dormant.dynamodb.outputs.changed`, a dev-stack shortcut): it is disabled, and a
`send(wait=True)` polls for its response at the intervals a deployed API does.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib.util
import io
import json
import math
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

import httpx
from aiobotocore.session import get_session  # type: ignore[import-untyped]

from benchmarks.prices import HTTP_API_METERING_BYTES, ROOT, Deployment, deployment
from dormant.aws import clients as aws_clients
from dormant.aws import observability
from dormant.aws.metering import Meter, ask_consumed_capacity, instrument, metering
from dormant.dev.dynamodb_local import CREDENTIALS, EmbeddedDynamoDBLocal, find_jar
from dormant.dev.embedded import EmbeddedMoto, free_port
from dormant.dynamodb.table import create_table
from dormant.settings import Settings
from dormant.sqs.poller import LambdaContext, SqsPoller
from dormant.sqs.transport import create_queues

REGION = "us-east-1"
CALLER = "arn:aws:iam::123456789012:user/bench"
PARTS = ("api", "worker", "event source")


class CountingStream(io.TextIOBase):
    """Stands in for the functions' stdout: counts the bytes they log (CloudWatch Logs ingests them), in total and
    by kind of record: the logger that wrote it (`dormant.wake`, `dormant.http`, ...) or `EMF` for a metrics
    document."""

    def __init__(self) -> None:
        self.bytes = 0
        self.by_kind: Counter[str] = Counter()
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        size = len(text.encode())
        kind = "other"
        if text.strip():
            try:
                record = json.loads(text)
            except ValueError:
                record = None
            if isinstance(record, dict):
                kind = "EMF" if "_aws" in record else str(record.get("name", "other"))
        with self._lock:
            self.bytes += size
            self.by_kind[kind] += size
        return len(text)

    def writable(self) -> bool:
        return True


STDOUT = CountingStream()
"""The functions' stdout, one for the whole process: powertools' loggers keep the stream of the first Logger made
for a service, so every stack of a run must write to the same one (each counts its own share by difference)."""


@dataclass
class Invocation:
    """One Lambda invocation: its billed duration and what it logged."""

    function: str
    wall_ms: float
    log_bytes: int
    records: int = 0  # SQS messages in the batch (worker)
    cpu_ms: float = 0.0  # the process's CPU during it (only the function's own when nothing else runs)
    started: float = 0.0  # time.monotonic() when it began (benchmarks/requests.py times the event source with it)

    @property
    def billed_ms(self) -> int:
        return max(1, math.ceil(self.wall_ms))


class FunctionHost:
    """One function's container: its handler module imported in its own thread and invoked there only."""

    def __init__(self, name: str, path: Path, stdout: CountingStream, timeout_ms: int, memory_mb: int) -> None:
        self.name = name
        self.stdout = stdout
        self.timeout_ms = timeout_ms
        self.memory_mb = memory_mb
        self.meter = Meter()
        self.scoped = True  # count the requests of an invocation in `meter` (see open_stack for the worker)
        self.invocations: list[Invocation] = []
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self.module: ModuleType = self._thread.submit(self._load, path).result()

    def _load(self, path: Path) -> ModuleType:
        asyncio.set_event_loop(asyncio.new_event_loop())  # the loop Mangum drives, as in a Lambda container
        spec = importlib.util.spec_from_file_location(f"bench_{self.name}_handler", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` in the function's thread (set-up work such as reaching its clients; not an invocation)."""
        return self._thread.submit(fn).result()

    async def invoke(self, event: dict[str, Any], records: int = 0) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._invoke, event, records)

    def _invoke(self, event: dict[str, Any], records: int) -> Any:
        context = LambdaContext(function_name=f"bench-{self.name}", memory_limit_in_mb=self.memory_mb,
                                invoked_function_arn=f"arn:aws:lambda:{REGION}:123456789012:function:bench-{self.name}",
                                timeout_ms=self.timeout_ms)
        logged = self.stdout.bytes
        started, cpu = time.perf_counter(), time.process_time()
        try:
            with metering(self.meter) if self.scoped else contextlib.nullcontext():
                return self.module.handler(event, context)
        finally:
            wall = (time.perf_counter() - started) * 1000
            self.invocations.append(Invocation(self.name, wall, self.stdout.bytes - logged, records,
                                              (time.process_time() - cpu) * 1000,
                                              time.monotonic() - wall / 1000))

    def close(self) -> None:
        self._thread.shutdown(wait=True)


@dataclass
class GatewayRequest:
    """One API Gateway request: its metered units, response bytes and access-log line."""

    units: int
    response_bytes: int
    log_bytes: int


def access_log_format(root: Path = ROOT) -> str:
    """The API stage's access-log format from template.yaml (one JSON line per request)."""
    text = (root / "template.yaml").read_text()
    found = re.search(r"Format: >-\n((?:\s{10}.*\n)+)", text)
    if found is None:
        raise ValueError("template.yaml: the API stage's AccessLogSettings Format was not found")
    return "".join(line.strip() for line in found.group(1).splitlines())


def platform_logging(root: Path = ROOT) -> str:
    """The functions' Lambda log settings in template.yaml, as a key of prices.LAMBDA_PLATFORM_LOG_BYTES_BY_CONFIG:
    "Text", or "JSON " and the SystemLogLevel (INFO when not set). The worker and the API must agree."""
    text = (root / "template.yaml").read_text()
    found = set()
    for group in ("WorkerLogGroup", "ApiLogGroup"):
        line = re.search(r"LoggingConfig: \{ LogGroup: !Ref " + group + r"([^}]*)\}", text)
        if line is None:
            raise ValueError(f"template.yaml: the LoggingConfig of {group} was not found")
        fields = dict(re.findall(r"(\w+): (\w+)", line.group(1)))
        fmt = fields.get("LogFormat", "Text")
        found.add(fmt if fmt == "Text" else f"JSON {fields.get('SystemLogLevel', 'INFO')}")
    if len(found) != 1:
        raise ValueError(f"template.yaml: the functions log differently ({sorted(found)}): count them one by one")
    return found.pop()


class ApiGateway(httpx.AsyncBaseTransport):
    """HTTP API in front of the API function: each request becomes a payload 2.0 event (IAM-authorized caller)."""

    def __init__(self, api: FunctionHost, *, access_log: bool = True) -> None:
        """`access_log`: whether the stage writes its access log (template.yaml's format); False: a stage without."""
        self.api = api
        self.requests: list[GatewayRequest] = []
        self._log_format = access_log_format() if access_log else ""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        request_id = str(uuid.uuid4())
        now = time.time()
        headers = {k.decode().lower(): v.decode() for k, v in request.headers.raw}
        event = {
            "version": "2.0", "routeKey": "$default", "rawPath": request.url.path,
            "rawQueryString": request.url.query.decode(), "headers": headers,
            "requestContext": {
                "accountId": "123456789012", "apiId": "bench", "domainName": request.url.host,
                "http": {"method": request.method, "path": request.url.path, "protocol": "HTTP/1.1",
                         "sourceIp": "203.0.113.7", "userAgent": headers.get("user-agent", "")},
                "requestId": request_id, "routeKey": "$default", "stage": "$default",
                "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)), "timeEpoch": int(now * 1000),
                "authorizer": {"iam": {"userArn": CALLER, "accountId": "123456789012"}}},
            "body": base64.b64encode(body).decode() if body else None, "isBase64Encoded": bool(body),
        }
        started = time.perf_counter()
        answer = await self.api.invoke(event)
        latency = int((time.perf_counter() - started) * 1000)
        raw = answer.get("body") or ""
        payload = base64.b64decode(raw) if answer.get("isBase64Encoded") else raw.encode()
        status = int(answer["statusCode"])
        response_headers = dict(answer.get("headers") or {})
        line = self._access_line(request_id, request.method, request.url.path, status, len(payload), latency)
        size = max(len(body), len(payload))
        self.requests.append(GatewayRequest(units=max(1, math.ceil(size / HTTP_API_METERING_BYTES)),
                                            response_bytes=len(payload) + sum(len(k) + len(v) + 4 for k, v in
                                                                              response_headers.items()),
                                            log_bytes=len(line.encode()) + 1 if line else 0))
        return httpx.Response(status, headers=response_headers, content=payload, request=request)

    def _access_line(self, request_id: str, method: str, path: str, status: int, size: int, latency: int) -> str:
        if not self._log_format:
            return ""
        values = {"requestId": request_id, "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000"),
                  "requestTimeEpoch": str(int(time.time() * 1000)),
                  "identity.sourceIp": "203.0.113.7", "httpMethod": method, "path": path, "routeKey": "$default",
                  "status": str(status), "responseLength": str(size), "integrationLatency": str(latency),
                  "identity.userArn": CALLER, "authorizer.claims.sub": "-", "error.message": "-",
                  "integrationErrorMessage": "-"}
        return re.sub(r"\$context\.([A-Za-z.]+)", lambda m: values.get(m.group(1), "-"), self._log_format)


@dataclass
class Batching:
    """An SQS event source's batching: at most `size` messages per invocation, gathered for up to `window`
    seconds (Lambda receives up to 10 per request; FIFO queues take no window)."""

    size: int = 10
    window: float = 0.0
    invoke_after: float = 0.0  # seconds from the batch's last receive to the worker's invocation (Lambda's Invoke path)


LAMBDA_POLL_SECONDS = 20
"""The long poll of Lambda's SQS pollers (ReceiveMessage's WaitTimeSeconds at SQS's maximum, FIFO queues too)."""


class EventSource:
    """One SQS event source mapping, run as Lambda's pollers run it.

    While idle it holds a long poll open (`wait_seconds`, Lambda's 20 s), so a message is received the moment it
    arrives. A receive that returns messages starts a batch: with a batching window the source keeps receiving, each
    receive a long poll for what is left of the window (whole seconds, as WaitTimeSeconds takes them), until the
    batch is full or the window, counted from that first receive, is over (the deployment's timer queue: 10 and 1 s;
    FIFO queues take no window, so a wake-up batch is what the first receive returned, up to 10). Then the worker is
    invoked and what it did not fail is deleted, and the long poll opens again.

    Counting: every receive and delete goes to `meter` once it has returned; a receive that returned nothing while no
    batch was being gathered (an idle long poll ending after `wait_seconds`) is the source's polling, also counted in
    `idle`. The receives of a batch's window count with the batch (empty or not): AWS's pollers make them for it.

    `hold()` stops it from opening another receive (it waits for the one open to end: give such a source a short
    `wait_seconds`) so that a scenario can queue messages up before they are delivered together; `release()`."""

    def __init__(self, poller: SqsPoller, batching: Batching, *, wait_seconds: int = LAMBDA_POLL_SECONDS) -> None:
        self.poller, self.batching, self.wait_seconds = poller, batching, wait_seconds
        self.meter, self.idle = Meter(), Meter()
        self.batches = 0  # batches delivered so far
        self.receiving = False  # a receive is open (outside a batch)
        self.busy = False  # a batch is being gathered or handled
        self._open = asyncio.Event()
        self._open.set()
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Cancel the loop (an open long poll is abandoned; its queue is not used again)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def check(self) -> None:
        """Raise what stopped the loop, if it stopped."""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            self._task.result()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def changed(self, timeout: float) -> None:
        """Wait for a batch to end or a receive to return (or `timeout` seconds)."""
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)

    async def hold(self, timeout: float = 30.0) -> None:
        self._open.clear()
        deadline = time.monotonic() + timeout
        while self.receiving or self.busy:
            if time.monotonic() > deadline:
                raise TimeoutError("the event source's receive did not end")
            await self.changed(0.1)

    def release(self) -> None:
        self._open.set()

    async def _receive(self, wait_seconds: int) -> tuple[list[dict[str, Any]], Meter]:
        """One receive, and what it was counted as (a meter of its own: it is filed once it has returned, so a long
        poll still open when a measurement window closes is in neither that window nor the next one's start)."""
        counted = Meter()
        with metering(counted):
            messages = await self.poller.receive(wait_seconds=wait_seconds)
        return messages, counted

    async def _run(self) -> None:
        poller, batching = self.poller, self.batching
        while True:
            await self._open.wait()
            self.receiving = True
            try:
                messages, counted = await self._receive(self.wait_seconds)
            finally:
                self.receiving = False
            if not messages:
                self.idle.add(counted)
                self.meter.add(counted)
                await self._notify()
                continue
            self.busy = True
            try:
                deadline = time.monotonic() + batching.window
                while len(messages) < batching.size and (remaining := deadline - time.monotonic()) > 0:
                    more, also = await self._receive(max(1, math.ceil(remaining)))
                    messages += more
                    counted.add(also)
                if batching.invoke_after:  # Lambda's hand-over, modelled (not a wait for anything)
                    await asyncio.sleep(batching.invoke_after)
                with metering(counted):
                    await poller.handle(messages)
            finally:
                self.meter.add(counted)
                self.busy = False
                self.batches += 1
            await self._notify()


@dataclass
class Stack:
    """The deployment, started by `open_stack`."""

    settings: Settings
    deploy: Deployment
    api: FunctionHost
    worker: FunctionHost
    gateway: ApiGateway
    sources: dict[str, EventSource]  # "wake", "timers"
    stdout: CountingStream
    reader: Any  # a DynamoDB client outside the deployment (not counted): the benchmark's own checks
    queues: Any  # an SQS client likewise

    @property
    def pollers(self) -> dict[str, SqsPoller]:
        return {name: source.poller for name, source in self.sources.items()}

    @property
    def batching(self) -> dict[str, Batching]:
        return {name: source.batching for name, source in self.sources.items()}

    @property
    def event_source(self) -> Meter:
        """Every request of the event sources so far (a new Meter: copy or subtract it)."""
        total = Meter()
        for source in self.sources.values():
            total.add(source.meter)
        return total

    @property
    def idle(self) -> Meter:
        """The event sources' polling so far: the receives that found nothing while no batch was gathered."""
        total = Meter()
        for source in self.sources.values():
            total.add(source.idle)
        return total

    @property
    def polling(self) -> Meter:
        """The event sources' receives and deletes, without their polling."""
        return self.event_source - self.idle

    def client(self) -> Any:
        from dormant.http.client import HttpClient

        return HttpClient(f"https://bench.execute-api.{REGION}.amazonaws.com", transport=self.gateway, timeout=60)

    async def hold(self) -> None:
        """Deliver nothing until the next `drain()`: messages sent meanwhile queue up (a load where they wait)."""
        await asyncio.gather(*(source.hold() for source in self.sources.values()))

    async def read_state(self, ref: Any) -> Any:
        """An actor's state read from the table directly: no API request, nothing counted, nothing settled."""
        from dormant.dynamodb.store import DynamoEventStore

        snapshot = await DynamoEventStore(self.reader, self.settings, settle_on_load=False).load(ref)
        return snapshot.state if snapshot is not None else {}

    async def _queue_counts(self, poller: SqsPoller, names: list[str]) -> int:
        attributes = (await self.queues.get_queue_attributes(QueueUrl=poller.queue_url,
                                                             AttributeNames=names))["Attributes"]
        return sum(int(attributes.get(name, 0)) for name in names)

    async def timers_fired(self) -> bool:
        """Whether the timer queue is empty: nothing delayed, visible or in flight."""
        return not await self._queue_counts(self.pollers["timers"], [
            "ApproximateNumberOfMessagesDelayed", "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible"])

    async def settled(self) -> bool:
        """No batch under way and nothing visible or in flight on either queue (delayed timers may wait)."""
        sources = self.sources.values()
        if any(s.busy for s in sources):
            return False
        batches = sum(s.batches for s in sources)
        for source in sources:
            if await self._queue_counts(source.poller, ["ApproximateNumberOfMessages",
                                                        "ApproximateNumberOfMessagesNotVisible"]):
                return False
        return not any(s.busy for s in sources) and sum(s.batches for s in sources) == batches

    async def drain(self, until: Callable[[], Any] | None = None, timeout: float = 60.0) -> None:
        """Let the event sources deliver (releasing a `hold()`) until both queues are settled and `until()` is
        true (e.g. timers on their way have fired). Waits on the sources, not on a clock: it looks again when a
        batch ends, or every 50 ms."""
        for source in self.sources.values():
            source.release()
        deadline = time.monotonic() + timeout
        wake = self.sources["wake"]
        while True:
            for source in self.sources.values():
                source.check()
            if (until is None or await until()) and await self.settled():
                return
            if time.monotonic() > deadline:
                raise TimeoutError("the scenario did not finish")
            await wake.changed(0.05)


def _environment(settings: Settings, urls: Any, endpoints: tuple[str, str], app: str) -> dict[str, str]:
    dynamodb, sqs = endpoints
    return {**CREDENTIALS, "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION, "DORMANT_APP": app,
            "DORMANT_TABLE": settings.table, "DORMANT_DYNAMODB_ENDPOINT_URL": dynamodb,
            "DORMANT_SQS_ENDPOINT_URL": sqs, "DORMANT_REGION": REGION,
            "DORMANT_QUEUE_NAME": settings.queue_name, "DORMANT_QUEUE_URL": urls.wake,
            "DORMANT_TIMER_QUEUE_NAME": settings.timer_queue_name, "DORMANT_TIMER_QUEUE_URL": urls.timers,
            "DORMANT_DLQ_NAME": settings.dlq_name, "DORMANT_DLQ_URL": urls.timers_dlq or "",
            "DORMANT_FIFO_DLQ_NAME": settings.fifo_dlq_name, "DORMANT_FIFO_DLQ_URL": urls.wake_dlq or "",
            "DORMANT_AUTH_MODE": "iam"}


@contextlib.contextmanager
def servers() -> Iterator[tuple[str, str]]:
    """DynamoDB Local and the embedded moto server (SQS), as child processes on free ports."""
    scratch = Path(tempfile.mkdtemp(prefix="dormant-price-"))
    dynamodb = EmbeddedDynamoDBLocal(find_jar(search=(ROOT,)), free_port(), db_path=None,
                                     log_path=scratch / "dynamodb-local.log")
    moto = EmbeddedMoto(log_path=scratch / "moto.log")
    dynamodb.start()
    try:
        moto.start()
        try:
            yield dynamodb.url, moto.url
        finally:
            moto.stop()
    finally:
        dynamodb.stop()


@contextlib.asynccontextmanager
async def open_stack(app: str, *, wake: Batching | None = None, timers: Batching | None = None,
                     endpoints: tuple[str, str] | None = None, env: dict[str, str] | None = None,
                     access_log: bool = True, poll_seconds: int = LAMBDA_POLL_SECONDS) -> Any:
    """Start the deployment (servers unless `endpoints` = (DynamoDB, SQS) are given) for the registry `app`;
    `env`: more environment for the functions (DORMANT_* settings); `access_log`: the API stage writes one;
    `poll_seconds`: the event sources' long poll (a scenario that `hold()`s them between rounds gives a short one)."""
    deploy = deployment()
    with contextlib.ExitStack() as sync_stack:
        dynamodb_url, sqs_url = endpoints or sync_stack.enter_context(servers())
        suffix = uuid.uuid4().hex[:8]
        settings = Settings(dynamodb_endpoint_url=dynamodb_url, sqs_endpoint_url=sqs_url, region=REGION,
                            table=f"price-{suffix}", queue_name=f"price-{suffix}.fifo",
                            timer_queue_name=f"price-timers-{suffix}", dlq_name=f"price-dlq-{suffix}",
                            fifo_dlq_name=f"price-dlq-{suffix}.fifo")
        saved_env, saved_stdout = dict(os.environ), sys.stdout
        observability_changed = observability.changed
        async with AsyncExitStack() as stack:
            session = get_session()
            kwargs = {"aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
                      "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"]}
            dynamodb = await stack.enter_async_context(session.create_client(
                "dynamodb", **settings.client_kwargs("dynamodb"), **kwargs))
            sqs = await stack.enter_async_context(session.create_client("sqs", **settings.client_kwargs("sqs"),
                                                                        **kwargs))
            await create_table(dynamodb, settings)
            urls = await create_queues(sqs, settings, visibility_timeout=30)
            os.environ.update({**_environment(settings, urls, (dynamodb_url, sqs_url), app),
                               "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(deploy.memory_mb), **(env or {})})
            stdout = STDOUT
            sys.stdout = stdout  # the functions' loggers take stdout when they are made (at import)
            # Every DynamoDB request of the functions' clients (made from this session) reports its capacity.
            ask_consumed_capacity(aws_clients.botocore_session(), unique_id="dormant-price-capacity")
            observability.changed = lambda key: None  # type: ignore[assignment]  # see the module docstring
            hosts: list[FunctionHost] = []
            try:
                api = FunctionHost("api", ROOT / "functions" / "api" / "handler.py", stdout, 30_000,
                                   deploy.memory_mb)
                hosts.append(api)
                worker = FunctionHost("worker", ROOT / "functions" / "worker" / "handler.py", stdout, 60_000,
                                      deploy.memory_mb)
                hosts.append(worker)

                def instrument_api() -> None:  # the API opens its clients at init (prewarm); count them
                    service = asyncio.get_event_loop().run_until_complete(api.module.app.state.services.get())
                    instrument(service.store.client)
                    instrument(service.transport.sqs)

                api.call(instrument_api)

                # The worker runs each invocation in an asyncio.Runner made at init, in the context it captured
                # then: a metering scope entered around the call is not seen inside. Enter it in the batch handler.
                batch_worker = worker.module.worker.worker  # LambdaWorker.prepare() built it at import
                handle = batch_worker.handle

                async def metered_handle(event: Any, context: Any = None) -> Any:
                    with metering(worker.meter):
                        return await handle(event, context)

                batch_worker.handle = metered_handle
                worker.scoped = False
                event_sqs = await stack.enter_async_context(session.create_client(
                    "sqs", **settings.client_kwargs("sqs"), **kwargs))
                instrument(event_sqs)
                batching = {"wake": wake or Batching(deploy.wake_batch_size),
                            "timers": timers or Batching(deploy.timer_batch_size, deploy.timer_batching_window)}

                async def to_worker(event: dict[str, Any], _context: Any) -> Any:
                    return await worker.invoke(event, records=len(event.get("Records", [])))

                sources = {name: EventSource(SqsPoller(event_sqs, url, to_worker,
                                                       batch_size=min(10, batching[name].size),
                                                       wait_seconds=poll_seconds, region=REGION),
                                             batching[name], wait_seconds=poll_seconds)
                           for name, url in (("wake", urls.wake), ("timers", urls.timers))}
                for source in sources.values():
                    source.start()
                try:
                    yield Stack(settings=settings, deploy=deploy, api=api, worker=worker,
                                gateway=ApiGateway(api, access_log=access_log), sources=sources, stdout=stdout,
                                reader=dynamodb, queues=sqs)
                finally:
                    for source in sources.values():
                        await source.stop()
            finally:
                for host in hosts:
                    host.close()
                sys.stdout = saved_stdout
                observability.changed = observability_changed  # type: ignore[assignment]
                os.environ.clear()
                os.environ.update(saved_env)


def encode_path(*parts: str) -> str:
    return "/".join(quote(part, safe="") for part in parts)
