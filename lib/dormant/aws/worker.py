"""The worker Lambda's logic: an SQS batch of wake-up messages -> one wake-up per actor -> partial failures.

`Worker.handle(event)` groups the batch by actor and wakes each actor once (concurrently across actors);
it answers `{"batchItemFailures": [...]}` naming every message whose wake-up did not complete, so the
event source deletes a message only after the commit that consumed what it was about. A timer that
arrives before its due time hops (re-sent with the remaining delay) instead of waking the actor.
A failed wake-up records its error on the actor (shown by status) before its messages are retried;
after `max_receives` receives SQS moves them to the DLQ.

`LambdaWorker` is the synchronous Lambda entry (functions/worker/handler.py): one event loop and one
set of clients per container, built on the first invocation from `Settings()` and `DORMANT_APP`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

from pydantic import ValidationError

from dormant.actor import Registry, load_registry
from dormant.aws.metering import Meter, instrument, metering
from dormant.aws.observability import ObservedStore, Observer
from dormant.aws.transport import SqsTransport, WakeMessage
from dormant.errors import InvalidKeyError
from dormant.ports import ActorRef, Clock, EventStore, WakeError
from dormant.runtime.clocks import SystemClock
from dormant.runtime.service import ActorService
from dormant.runtime.wake import WakeReport, wake_actor
from dormant.settings import Settings

log = logging.getLogger("dormant.aws.worker")
MAX_ERROR_TEXT = 2000

BatchResponse = dict[str, list[dict[str, str]]]


@dataclass
class WakeFailure:
    """A wake-up that raised; its messages were reported failed (SQS redelivers them)."""

    ref: ActorRef
    error: BaseException
    message_ids: list[str]
    receive_count: int


@dataclass
class WakeMetrics:
    """AWS requests made by one wake-up (DynamoDB reads/writes, SQS sends, bytes)."""

    ref: ActorRef
    meter: Meter
    report: WakeReport | None


class Worker:
    """Runs batches of wake-up messages over an ActorService whose transport is an SqsTransport."""

    def __init__(self, service: ActorService, transport: SqsTransport, *, observer: Observer | None = None,
                 max_receives: int | None = None) -> None:
        self.service = service
        self.transport = transport
        self.observer = observer or Observer()  # a log record (and metrics) per wake-up
        self.max_receives = max_receives
        self.reports: list[WakeReport] = []
        self.failures: list[WakeFailure] = []
        self.metrics: list[WakeMetrics] = []
        self.hops = 0
        self._running: dict[str, tuple[asyncio.Lock, int]] = {}  # per actor: one wake-up at a time, users

    async def handle(self, event: Mapping[str, Any], context: Any = None) -> BatchResponse:
        """Lambda's SQS batch in, ReportBatchItemFailures response out."""
        records: list[Mapping[str, Any]] = list(event.get("Records") or [])
        failed: list[str] = []
        groups: dict[str, tuple[ActorRef, list[Mapping[str, Any]]]] = {}
        early: list[tuple[Mapping[str, Any], WakeMessage]] = []
        now = self.service.clock.now()
        for record in records:
            try:
                message = WakeMessage.model_validate_json(record["body"])
                ref = message.ref
            except (KeyError, ValidationError, InvalidKeyError) as error:
                # Unreadable: it can never succeed, so it fails until the redrive moves it to the DLQ.
                log.error("unreadable wake-up message %s: %s", record.get("messageId"), error)
                failed.append(str(record.get("messageId")))
                continue
            if message.due is not None and message.due > now:
                early.append((record, message))
            else:
                groups.setdefault(ref.id, (ref, []))[1].append(record)
        outcomes = await asyncio.gather(*(self._hop(record, message) for record, message in early),
                                        *(self._wake(ref, group) for ref, group in groups.values()))
        for ids in outcomes:
            failed.extend(ids)
        return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}

    async def _hop(self, record: Mapping[str, Any], message: WakeMessage) -> list[str]:
        """An early timer: send it again with the remaining delay; the old one may then be deleted."""
        try:
            delay = await self.transport.send_timer(message.model_copy(update={"hops": message.hops + 1}))
        except Exception as error:
            log.warning("could not re-send timer for %s: %r", message.ref, error)
            return [record["messageId"]]
        self.hops += 1
        log.debug("timer for %s hops (%d): %d s more", message.ref, message.hops + 1, delay)
        return []

    async def _wake(self, ref: ActorRef, records: list[Mapping[str, Any]]) -> list[str]:
        # Concurrent batches (the FIFO and the timer queue, or a redelivery) may name the same actor: the
        # version check keeps that correct, the lock keeps one process from running its steps twice.
        lock, users = self._running.get(ref.id, (asyncio.Lock(), 0))
        self._running[ref.id] = (lock, users + 1)
        try:
            async with lock:
                return await self._wake_once(ref, records)
        finally:
            lock, users = self._running[ref.id]
            if users == 1:
                del self._running[ref.id]
            else:
                self._running[ref.id] = (lock, users - 1)

    async def _wake_once(self, ref: ActorRef, records: list[Mapping[str, Any]]) -> list[str]:
        ids = [str(record["messageId"]) for record in records]
        with metering() as meter:
            watch = self.observer.begin(ref, records)
            receives = max(_receive_count(record) for record in records)
            try:  # a first delivery need not re-send the timer of a deadline committed before (see wake_actor)
                report = await wake_actor(self.service, ref, redelivered=receives > 1)
            except Exception as error:
                self.observer.failed(watch, error, meter, max_receives=self.max_receives)
                await self._record_error(ref, error, receives)
                self.failures.append(WakeFailure(ref, error, ids, receives))
                self.metrics.append(WakeMetrics(ref, meter, None))
                return ids
            self.observer.finished(watch, report, meter)
        self.reports.append(report)
        self.metrics.append(WakeMetrics(ref, meter, report))
        log.debug("woke %s: %s, %d commit(s); %s", ref, report.outcome, report.commits, meter.summary())
        return []

    async def _record_error(self, ref: ActorRef, error: BaseException, receives: int) -> None:
        """Best effort: the error shows on the actor's status until a later commit."""
        store = self.service.store
        try:
            snapshot = await store.load(ref)
            if snapshot is None:
                return
            text = f"{type(error).__name__}: {error}"[:MAX_ERROR_TEXT]
            await store.record_wake_error(ref, WakeError(message=text, at=self.service.clock.now(),
                                                         receive_count=receives, version=snapshot.version))
        except Exception as failure:
            log.warning("could not record the wake-up error of %s: %r", ref, failure)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _receive_count(record: Mapping[str, Any]) -> int:
    try:
        return int(record.get("attributes", {}).get("ApproximateReceiveCount", 1))
    except (TypeError, ValueError):
        return 1


StoreWrapper = Callable[[EventStore], EventStore]


@asynccontextmanager
async def open_worker(settings: Settings, registry: Registry, *, clock: Clock | None = None,
                      wrap_store: StoreWrapper | None = None, meter: Meter | None = None,
                      observer: Observer | None = None) -> AsyncIterator[Worker]:
    """A Worker on DynamoDB + SQS as the settings describe (clients closed on exit).

    `meter` counts every request of these clients (metering scopes count them too); `observer` gets a
    record of every wake-up (default: a log line).
    """
    from aiobotocore.session import get_session  # type: ignore[import-untyped]

    from dormant.aws.store import DynamoEventStore, client_config

    clock = clock or SystemClock()
    session = get_session()
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(session.create_client(
            service, config=client_config(), **settings.client_kwargs(service))) for service in ("dynamodb", "sqs")]
        for client in clients:
            instrument(client, always=meter)
        dynamodb, sqs = clients
        store: EventStore = DynamoEventStore(dynamodb, settings)
        if wrap_store is not None:
            store = wrap_store(store)
        observer = observer or Observer()
        store = cast(EventStore, ObservedStore(store, observer))  # an EventStore by delegation
        transport = await SqsTransport.from_settings(sqs, settings, clock)
        yield Worker(ActorService(registry, store, transport, clock), transport, observer=observer,
                     max_receives=settings.max_receives)


class LambdaWorker:
    """Synchronous `handler(event, context)` for Lambda: one event loop and client set per container."""

    def __init__(self, *, settings: Settings | None = None, registry: Registry | None = None,
                 clock: Clock | None = None, wrap_store: StoreWrapper | None = None,
                 observer: Observer | None = None) -> None:
        self._settings = settings
        self._observer = observer
        self._registry = registry
        self._clock = clock
        self._wrap_store = wrap_store
        self._lock = threading.Lock()  # a container runs one invocation at a time
        self._runner: asyncio.Runner | None = None
        self._stack: AsyncExitStack | None = None
        self.worker: Worker | None = None

    def __call__(self, event: Mapping[str, Any], context: Any = None) -> BatchResponse:
        with self._lock:
            if self._runner is None:
                self._runner = asyncio.Runner()
            return self._runner.run(self._handle(event))

    def prepare(self) -> None:
        """Build the worker now rather than on the first invocation: the imports, the registry, the session and
        the clients (no connection is opened). Called in the init phase, where a SnapStart snapshot keeps it.
        Without both queue URLs (resolving them would call SQS) or inside a running event loop (a test), it
        leaves that to the first invocation."""
        settings = self._settings or Settings()
        if _loop_running() or not (settings.queue_url and settings.timer_queue_url):
            return
        with self._lock:
            if self._runner is None:
                self._runner = asyncio.Runner()
            self._runner.run(self._ensure())

    async def _handle(self, event: Mapping[str, Any]) -> BatchResponse:
        worker = await self._ensure()
        return await worker.handle(event)

    async def _ensure(self) -> Worker:
        if self.worker is None:
            settings = self._settings or Settings()
            registry = self._registry
            if registry is None:
                if not settings.app:
                    raise RuntimeError("set DORMANT_APP=module:attribute to the registry the worker runs")
                registry = load_registry(settings.app)
            stack = AsyncExitStack()
            self.worker = await stack.enter_async_context(
                open_worker(settings, registry, clock=self._clock, wrap_store=self._wrap_store,
                            observer=self._observer))
            self._stack = stack
        return self.worker

    def close(self) -> None:
        """Close the clients and the event loop (the next invocation builds them again)."""
        with self._lock:
            if self._runner is None:
                return
            if self._stack is not None:
                self._runner.run(self._stack.aclose())
            self._runner.close()
            self._runner, self._stack, self.worker = None, None, None
