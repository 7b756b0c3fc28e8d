"""The worker Lambda's logic: an SQS batch of wake-up messages -> one wake-up per actor -> partial failures.

`Worker.handle(event, context)` groups the batch by actor and wakes each actor once (concurrently across
actors); it answers `{"batchItemFailures": [...]}` naming every message whose wake-up did not complete, so the
event source deletes a message only after the commit that consumed what it was about. A timer that arrives
before its due time hops (re-sent with the remaining delay) instead of waking the actor. Wake-up messages
carry what their request stores; the wake-up stores what the store lacks (runtime.wake).

Time and ownership (dormant.aws.redelivery): the worker reads the invocation's remaining time from the Lambda
context, starts no wake-up with less than `worker_reserve_seconds` left (those messages go straight back) and
gives each wake-up the rest as its budget; while a wake-up runs its messages' visibility is extended. A failed
wake-up records its error on the actor (shown by status) and its messages come back after a backoff; on the
last receive (`max_receives`) a failure by the actor's own error moves them to the DLQ with the actor, error
type and message as attributes, while messages that ran out of receives without such a failure (a killed
worker, an outage) are refreshed instead: healthy wake-ups never reach a DLQ.

`LambdaWorker` is the synchronous Lambda entry (functions/worker/handler.py): one event loop and one
set of clients per container, built on the first invocation from `Settings()` and `DORMANT_APP`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

from pydantic import ValidationError

from dormant.actor import Registry, load_registry
from dormant.aws.clients import inline_calls
from dormant.aws.consumed import ConsumedMessages
from dormant.aws.metering import Meter, instrument, metering
from dormant.aws.observability import ObservedStore, Observer
from dormant.aws.realtime import Broadcaster
from dormant.aws.redelivery import Redelivery, backoff_seconds, delivered_before, is_transient, receive_count
from dormant.errors import InvalidKeyError
from dormant.ports import ActorRef, Clock, EventStore, WakeError
from dormant.runtime import tracing
from dormant.runtime.attention import mark_wake_error
from dormant.runtime.clocks import SystemClock
from dormant.runtime.service import ActorService
from dormant.runtime.waits import inline_wait_for
from dormant.runtime.wake import WakeReport, wake_actor
from dormant.settings import Settings
from dormant.sqs.transport import SqsTransport, WakeMessage

log = logging.getLogger("dormant.aws.worker")
MAX_ERROR_TEXT = 2000
REFS_KEPT = 4096  # actor refs a worker keeps to reuse (forgotten all at once past this: a warm container's actors)

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

    def __init__(self, service: ActorService, transport: SqsTransport, settings: Settings | None = None, *,
                 observer: Observer | None = None, broadcaster: Broadcaster | None = None) -> None:
        self.service = service
        self.broadcaster = broadcaster  # pushes committed events to WebSocket connections (dormant.aws.realtime)
        self.transport = transport
        self.settings = settings if settings is not None else Settings()
        self.redelivery = Redelivery(transport.sqs, transport.urls, self.settings)
        self.observer = observer or Observer()  # a log record (and metrics) per wake-up
        # What the wake-ups did, for tests and `dormant dev`; LambdaWorker keeps only the current invocation's
        # (forget_records): a warm container runs for hours, and these would grow with every wake-up.
        self.reports: list[WakeReport] = []
        self.failures: list[WakeFailure] = []
        self.metrics: list[WakeMetrics] = []
        self.hops = 0
        self.deferred = 0  # messages handed back unstarted: too little invocation time was left
        self.consumed = ConsumedMessages()  # what this worker's wake-ups consumed (dormant.aws.consumed)
        self.skipped = 0  # wake-up messages that needed no wake-up: their messages were consumed already
        self._running: dict[str, tuple[asyncio.Lock, int]] = {}  # per actor: one wake-up at a time, users
        # One ActorRef per actor, reused by its later wake-ups: a ref is immutable, and making one validates its key
        # and its id's size, and its `id` is computed once per ref (the store's keys, the consumed ids, the lock)
        self._refs: dict[tuple[str, tuple[str, ...]], ActorRef] = {}
        # Whether this worker's event loop runs nothing but its batches (LambdaWorker's, one per container): then a
        # request may block the loop for its round trip. Not where a test, `dormant dev` or an app's own server shares
        # the loop: a blocked loop could not serve a request the worker is waiting for.
        self.loop_owned = False

    def forget_records(self) -> None:
        """Drop the reports, failures and metrics of earlier batches (the counters stay)."""
        self.reports.clear()
        self.failures.clear()
        self.metrics.clear()

    async def handle(self, event: Mapping[str, Any], context: Any = None) -> BatchResponse:
        """Lambda's SQS batch in, ReportBatchItemFailures response out. `context`: Lambda's context object
        (its remaining time bounds what this invocation starts)."""
        deadline = None
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        if callable(remaining):
            deadline = time.monotonic() + float(remaining()) / 1000
        records: list[Mapping[str, Any]] = list(event.get("Records") or [])
        failed: list[str] = []
        groups: dict[str, tuple[ActorRef, list[tuple[Mapping[str, Any], WakeMessage]]]] = {}
        early: list[tuple[Mapping[str, Any], WakeMessage]] = []
        now = self.service.clock.now()
        for record in records:
            try:
                message = WakeMessage.model_validate_json(record["body"])
                ref = self._ref(message)
            except (KeyError, ValidationError, InvalidKeyError) as error:
                # Unreadable: it can never succeed, so it fails until the redrive moves it to the DLQ.
                log.error("unreadable wake-up message %s: %s", record.get("messageId"), error)
                failed.append(str(record.get("messageId")))
                continue
            if message.due is not None and message.due > now:
                early.append((record, message))
            else:
                groups.setdefault(ref.id, (ref, []))[1].append((record, message))
        runs = [*(self._hop(record, message) for record, message in early),
                *(self._wake(ref, group, deadline) for ref, group in groups.values())]
        if len(runs) == 1:
            # One actor's batch (the FIFO queue's usual one) runs in this task: a task of its own would only cost. Its
            # requests go one at a time: where nothing else runs on this loop, on its thread (not handed to a pool
            # thread and back each: dormant.core.clients.inline_calls).
            with inline_calls() if self.loop_owned else contextlib.nullcontext():
                outcomes = [await runs[0]]
        else:  # several actors' wake-ups overlap their requests
            outcomes = await asyncio.gather(*runs)
        for ids in outcomes:
            failed.extend(ids)
        return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}

    def _ref(self, message: WakeMessage) -> ActorRef:
        """The message's actor: the ref made for the same name and key before, else a new one (validated)."""
        name = (message.actor, tuple(message.key))
        ref = self._refs.get(name)
        if ref is None:
            ref = message.ref  # (raises for an invalid key, as before: nothing is kept then)
            if len(self._refs) >= REFS_KEPT:
                self._refs.clear()
            self._refs[name] = ref
        return ref

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

    async def _wake(self, ref: ActorRef, group: list[tuple[Mapping[str, Any], WakeMessage]],
                    deadline: float | None) -> list[str]:
        # Concurrent batches (the FIFO and the timer queue, or a redelivery) may name the same actor: the
        # version check keeps that correct, the lock keeps one process from running its steps twice.
        records = [record for record, _ in group]
        if self._done(ref, group):
            return []
        receives = max(receive_count(record) for record in records)
        failing, needed = await self._failing(ref, group) if receives >= 2 else (True, [])
        if receives >= 2 and self.settings.max_receives >= 2 and not failing:
            # Received before, yet no wake-up of this actor failed by its own error: it was interrupted (a
            # killed or timed-out worker, a receive lost with the process that made it, an outage). A fresh
            # copy keeps it from SQS's dead-letter redrive. Done first (before waiting for the actor) and at the
            # second receive already: every later receive that gets this far tries again, so only a message
            # interrupted on each of its receives could reach the DLQ. Poison is not refreshed: its first
            # failure is recorded, so it runs (and fails) until the last receive moves it to the DLQ.
            replaced = await self.redelivery.refresh(ref, records, needed, self._plain(ref))
            log.info("refreshed %d message(s) of %s after %d receive(s)", len(replaced), ref, receives)
            return [str(r["messageId"]) for r in records if str(r["messageId"]) not in replaced]
        lock, users = self._running.get(ref.id, (asyncio.Lock(), 0))
        self._running[ref.id] = (lock, users + 1)
        try:
            async with self.redelivery.owned(records), lock:
                if self._done(ref, group):  # the wake-up this one waited for consumed its messages
                    return []
                budget = None
                if deadline is not None:
                    budget = deadline - time.monotonic() - self.settings.worker_reserve_seconds
                    if budget <= 0:  # too late to start: another invocation takes them at once
                        await self.redelivery.back_off(records, 0)
                        self.deferred += len(records)
                        log.info("invocation nearly over: %d message(s) of %s handed back", len(records), ref)
                        return [str(record["messageId"]) for record in records]
                return await self._wake_once(ref, group, budget, receives)
        finally:
            lock, users = self._running[ref.id]
            if users == 1:
                del self._running[ref.id]
            else:
                self._running[ref.id] = (lock, users - 1)

    async def _wake_once(self, ref: ActorRef, group: list[tuple[Mapping[str, Any], WakeMessage]],
                         budget: float | None, receives: int) -> list[str]:
        """`receives`: the most times a message of the group was received (`receive_count`)."""
        records = [record for record, _ in group]
        ids = [str(record["messageId"]) for record in records]
        last = receives >= self.settings.max_receives
        carried = [message.message for _, message in group if message.message is not None]
        creation = next((message.creation for _, message in group if message.creation is not None), None)
        with metering() as meter:
            watch = self.observer.begin(ref, records, dues=[message.due for _, message in group], receives=receives)
            # A first delivery need not re-send the timer of a deadline committed before (see wake_actor); a
            # refreshed copy counts as a redelivery (the wake-up it replaces may have died before that send).
            redelivered = any(delivered_before(record) for record in records)
            try:
                report = await wake_actor(self.service, ref, budget=budget, messages=carried, creation=creation,
                                          redelivered=redelivered)
            except Exception as error:
                await self._pushed()
                transient = is_transient(error)
                self.observer.failed(watch, error, meter, dead_letter=last and not transient)
                await self._record_error(ref, error, receives, transient)
                self.failures.append(WakeFailure(ref, error, ids, receives))
                self.metrics.append(WakeMetrics(ref, meter, None))
                delay = backoff_seconds(receives, self.settings.wake_retry_base, self.settings.wake_retry_max)
                if last and not transient:
                    moved = await self.redelivery.dead_letter(ref, records, error)
                    log.error("moved %d poison message(s) of %s to the DLQ: %s: %s", len(moved), ref,
                              type(error).__name__, error)
                    return [mid for mid in ids if mid not in moved]
                if last:  # the store or the queue is down: retried for as long as it takes
                    replaced = await self.redelivery.refresh(ref, records, records, self._plain(ref), delay)
                    return [mid for mid in ids if mid not in replaced]
                await self.redelivery.back_off(records, delay)
                return ids
            self.observer.finished(watch, report, meter)
            await self._pushed()
        if report.consumed:
            self.consumed.add(ref.id, report.consumed)
        self.reports.append(report)
        self.metrics.append(WakeMetrics(ref, meter, report))
        if log.isEnabledFor(logging.DEBUG):  # (the summary is made only for a logger that writes it)
            log.debug("woke %s: %s, %d commit(s); %s", ref, report.outcome, report.commits, meter.summary())
        return []

    async def _pushed(self) -> None:
        """The wake-up's event pushes, done or cut at their bound (Lambda freezes what still runs at return)."""
        if self.broadcaster is not None:
            await self.broadcaster.flush()

    def _done(self, ref: ActorRef, group: list[tuple[Mapping[str, Any], WakeMessage]]) -> bool:
        """Whether every message of the group needs no wake-up (dormant.aws.consumed): counted and logged."""
        if not all(not delivered_before(record) and self.consumed.done(ref.id, message) for record, message in group):
            return False
        self.skipped += len(group)
        self.observer.skipped(ref, len(group))
        return True

    async def _failing(self, ref: ActorRef, group: list[tuple[Mapping[str, Any], WakeMessage]]
                       ) -> tuple[bool, list[Mapping[str, Any]]]:
        """(whether the actor's last wake-ups failed by its own error, recorded since its last commit; the
        group's records that carry what the store still lacks)."""
        try:
            snapshot = await self.service.store.load(ref)
        except Exception:
            return True, []  # cannot tell: run it (if the store is down, that fails as transient, then refreshes)
        held = snapshot.held_ids if snapshot is not None else set()
        needed = [record for record, message in group
                  if (message.message is not None and message.message.id not in held)
                  or (message.creation is not None and snapshot is None)]
        if snapshot is None or snapshot.wake_error is None:
            return False, needed
        error = snapshot.wake_error
        return error.failures > 0 and (error.version is None or error.version >= snapshot.version), needed

    @staticmethod
    def _plain(ref: ActorRef) -> str:
        """The body of a wake-up that carries nothing: "look at this actor"."""
        return WakeMessage.for_ref(ref).model_dump_json(exclude_defaults=True)

    async def _record_error(self, ref: ActorRef, error: BaseException, receives: int, transient: bool) -> None:
        """Best effort: the error shows on the actor's status until a later commit."""
        store = self.service.store
        try:
            snapshot = await store.load(ref)
            if snapshot is None:
                return
            previous = snapshot.wake_error
            failures = previous.failures if previous is not None and (
                previous.version is None or previous.version >= snapshot.version) else 0
            text = f"{type(error).__name__}: {error}"[:MAX_ERROR_TEXT]
            at = self.service.clock.now()
            await store.record_wake_error(ref, WakeError(message=text, at=at, receive_count=receives,
                                                         version=snapshot.version,
                                                         failures=failures + (0 if transient else 1)))
            await mark_wake_error(store, ref, at)  # the dashboard's attention list (dormant.runtime.attention)
        except Exception as failure:
            log.warning("could not record the wake-up error of %s: %r", ref, failure)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


StoreWrapper = Callable[[EventStore], EventStore]


@asynccontextmanager
async def open_worker(settings: Settings, registry: Registry, *, clock: Clock | None = None,
                      wrap_store: StoreWrapper | None = None, meter: Meter | None = None,
                      observer: Observer | None = None) -> AsyncIterator[Worker]:
    """A Worker on DynamoDB + SQS as the settings describe (clients closed on exit).

    `meter` counts every request of these clients (metering scopes count them too); `observer` gets a
    record of every wake-up (default: a log line). The clients are made as `settings.aws_clients` says
    (dormant.aws.clients).
    """
    from dormant.aws.clients import open_clients
    from dormant.aws.realtime import BroadcastingStore, open_management
    from dormant.dynamodb.connections import Connections
    from dormant.dynamodb.requests import Table
    from dormant.dynamodb.store import DynamoEventStore
    from dormant.s3.blobs import S3Blobs

    clock = clock or SystemClock()
    services = ["dynamodb", "sqs", *(["s3"] if settings.bucket else [])]  # S3: large values (docs/limits.md)
    async with AsyncExitStack() as stack:
        clients = await stack.enter_async_context(open_clients(settings, *services))
        for client in clients:
            instrument(client, always=meter)
        dynamodb, sqs = clients[:2]
        blobs = S3Blobs(clients[2], settings.bucket) if settings.bucket else None
        store: EventStore = DynamoEventStore(dynamodb, settings, blobs=blobs)
        if wrap_store is not None:
            store = wrap_store(store)
        broadcaster = None
        if settings.realtime_url:  # WebSocket subscribers are pushed each commit's events (docs/realtime.md)
            management = await stack.enter_async_context(open_management(settings))
            broadcaster = Broadcaster(Connections(Table(dynamodb, settings.table), clock.now), management.post)
            store = cast(EventStore, BroadcastingStore(store, broadcaster))  # an EventStore by delegation
        observer = observer or Observer()
        store = cast(EventStore, ObservedStore(store, observer))  # an EventStore by delegation
        transport = await SqsTransport.from_settings(sqs, settings, clock)
        service = ActorService(registry, store, transport, clock, public_url=settings.public_url,
                               inline_wait=inline_wait_for(settings.inline_wait, settings.function_memory_mb))
        yield Worker(service, transport, settings, observer=observer, broadcaster=broadcaster)


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
            return self._runner.run(self._handle(event, context))

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

    async def _handle(self, event: Mapping[str, Any], context: Any) -> BatchResponse:
        worker = await self._ensure()
        worker.forget_records()  # one container, many invocations: keep only this one's
        try:
            return await worker.handle(event, context)
        finally:
            tracing.flush()  # the container may freeze once this returns

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
            self.worker.loop_owned = True  # (its own asyncio.Runner: nothing else runs on the loop)
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
