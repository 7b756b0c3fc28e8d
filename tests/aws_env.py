"""`AwsTestEnv`: the interface of dormant.testing.TestEnv, running on a DynamoDB-compatible server, SQS and
the poller that plays Lambda's event source (the worker runs in-process, on the same event loop).

    async with AwsTestEnv(registry) as env:          # settings from the environment (AWS_ENDPOINT_URL, ...)
        handle = env.client.get_or_create("counter", ["main"])
        await handle.send("counter", {"delta": 1})
        await env.run_until_idle()
        await env.advance(3600)                      # timers due in the hour fire in time order
    async with AwsTestEnv(registry, store=env.store) as again:   # a new deploy over the stored actors
        ...

The clock stands still unless `advance()` moves it, as TestEnv's does (from the same start), so tests can
compare deadlines exactly. Every actor the env has seen is tracked; `advance()` steps the clock to each due
time the store records for them (deadlines, step retries, scheduled actions) in order and wakes the actors
due then, as TestEnv fires its timers; timers are not sent to SQS, since this clock never reaches them by
itself. With `real_time=True` the clock is real time plus an offset that `advance()` moves, and timers also
go through SQS as delayed messages (hopping when longer than the hop limit) and fire by themselves.
`run_until_idle()` waits until both queues hold no visible or in-flight message; delayed timer messages
are not waited for (they belong to the future, as in TestEnv).

As in TestEnv, wake-ups run while the test waits: inside `run_until_idle()` / `advance()` and while a
client waits for a response or for events (`send(wait=True)`, `events(follow=True)`); between those the
pollers are paused, so messages sent in a row are there together when the actor next wakes. Pass
`autorun=True` to poll all the time instead (wake-ups then race the test, as in production).

Also as in TestEnv (docs/testing.md): a waiting send's timeout is on the env's clock; `run_until_idle()` waits
for sends and calls started in a task just before; `advance()` stops at each in-process wait on the clock
(a race timer beside a running step) as at each timer, and does not wait for a wake-up that waits for the
clock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiobotocore.session import get_session  # type: ignore[import-untyped]

from dormant.actor import Registry
from dormant.aws.clients import open_clients
from dormant.aws.metering import Meter, instrument
from dormant.aws.worker import WakeFailure, Worker
from dormant.client import Client
from dormant.dynamodb.store import DynamoEventStore, create_table
from dormant.errors import WakeFailedError
from dormant.ports import ActorRef, Creation, EventRecord, EventStore, InboxMessage
from dormant.runtime.clocks import OffsetClock, sleeping_party
from dormant.runtime.wake import WakeReport
from dormant.s3.blobs import S3Blobs
from dormant.settings import Settings
from dormant.sqs.poller import SqsPoller
from dormant.sqs.transport import QueueUrls, SqsTransport, create_queues
from dormant.testing import DEFAULT_START, PATIENCE, TEST_PUBLIC_URL, EnvService
from dormant.workflow.history import WorkflowState

IDLE_TIMEOUT = 60.0
MAX_TIMER_STEPS = 10_000


@dataclass
class _Deployment:
    """What a later AwsTestEnv(store=...) over the same store inherits (a redeploy keeps table and queues)."""

    settings: Settings
    offset: float
    now: float
    known: dict[str, ActorRef] = field(default_factory=dict)


_deployments: weakref.WeakKeyDictionary[Any, _Deployment] = weakref.WeakKeyDictionary()


class _TrackingTransport:
    """The SQS transport, remembering every actor it wakes (the env's list of known actors).

    With `send_timers=False` (a clock that stands still) timers are not sent: such a clock never reaches
    their due time by itself, and `advance()` wakes each actor at its due time from what the store says."""

    def __init__(self, inner: SqsTransport, known: dict[str, ActorRef], *, send_timers: bool) -> None:
        self.inner = inner
        self.known = known
        self.send_timers = send_timers
        self.on_wake: Callable[[], None] | None = None

    async def wake(self, ref: ActorRef, *, at: float | None = None, reason: str | None = None,
                   message: InboxMessage | None = None, creation: Creation | None = None) -> None:
        self.known.setdefault(ref.id, ref)
        immediate = at is None or at <= self.inner.clock.now()
        if immediate or self.send_timers:
            await self.inner.wake(ref, at=at, reason=reason, message=message, creation=creation)
        if self.on_wake is not None and immediate:
            self.on_wake()

    async def wake_many(self, ref: ActorRef, messages: Any, *, creation: Creation | None = None) -> list[str]:
        """The SQS transport's batched wake-ups (dormant.runtime.batches.BatchTransport)."""
        self.known.setdefault(ref.id, ref)
        sent = await self.inner.wake_many(ref, messages, creation=creation)
        if self.on_wake is not None:
            self.on_wake()
        return sent


class _CountingPoller(SqsPoller):
    """A poller that numbers its receives and remembers the last one that found nothing: the idle check waits for
    an empty receive that started after it read the queue counts (see AwsTestEnv._until_idle)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.receives_started = 0
        self.last_empty_receive = -1  # the number of the latest receive that returned no message

    async def receive(self, wait_seconds: int | None = None) -> list[dict[str, Any]]:
        number = self.receives_started
        self.receives_started += 1
        messages = await super().receive(wait_seconds)
        if not messages:
            self.last_empty_receive = max(self.last_empty_receive, number)
        return messages


class AwsTestEnv:
    """TestEnv on DynamoDB + SQS + the poller; see the module docstring."""

    __test__ = False

    def __init__(self, registry: Registry, *, store: EventStore | None = None, settings: Settings | None = None,
                 visibility_timeout: int = 1, max_receives: int = 5, hop_max_delay: int | None = None,
                 autorun: bool = False, real_time: bool = False, start: float | None = None,
                 offload: bool = True, patience: float | None = PATIENCE) -> None:
        """`offload`: a bucket of its own for values too big for the log (DORMANT_BUCKET; False: none)."""
        self.registry = registry
        previous = _deployments.get(store) if store is not None else None
        if previous is not None:
            base = previous.settings
        else:
            base = settings or Settings()
            suffix = uuid.uuid4().hex[:10]
            base = base.model_copy(update={
                "table": f"dormant-{suffix}", "queue_name": f"wake-{suffix}.fifo", "queue_url": None,
                "timer_queue_name": f"timers-{suffix}", "timer_queue_url": None, "dlq_name": f"dlq-{suffix}",
                "fifo_dlq_name": f"dlq-{suffix}.fifo", "max_receives": max_receives,
                "bucket": f"dormant-{suffix}" if offload else None})
        if hop_max_delay is not None:
            base = base.model_copy(update={"timer_hop_max_delay": hop_max_delay})
        self.settings = base
        self.visibility_timeout = visibility_timeout
        if real_time:
            self.clock = OffsetClock(previous.offset if previous else (start - time.time() if start else 0.0))
        else:
            self.clock = OffsetClock(frozen_at=previous.now if previous else (start or DEFAULT_START))
        self.known: dict[str, ActorRef] = dict(previous.known) if previous else {}
        self._redeploy = previous is not None
        self.meter = Meter()
        self.autorun = autorun
        self.patience = patience  # for a waiting send nothing can answer (see EnvService); run_until_idle: its timeout
        self._activity = 0
        self._stack = AsyncExitStack()
        self._tasks: list[asyncio.Task[None]] = []
        self._reported_poison = 0
        self._handling: dict[object, int] = {}  # worker invocations under way -> how many records each has
        # Set in __aenter__:
        self.store: EventStore
        self.urls: QueueUrls
        self.service: EnvService
        self.client: Client
        self.worker: Worker
        self.pollers: list[_CountingPoller] = []
        self._sqs: Any = None
        self.s3: Any = None

    # -- lifecycle -------------------------------------------------------------------------------------
    async def __aenter__(self) -> AwsTestEnv:
        # Made as the settings say (aiobotocore's, or botocore's in threads: what the Lambda functions run).
        clients = await self._stack.enter_async_context(open_clients(self.settings, "dynamodb", "sqs", "s3"))
        for client in clients:
            instrument(client, always=self.meter)
        dynamodb, sqs, s3 = clients
        self._sqs = sqs
        self.s3 = s3
        await create_table(dynamodb, self.settings)
        blobs = None
        if self.settings.bucket is not None:
            if not self._redeploy:
                await s3.create_bucket(Bucket=self.settings.bucket)
            blobs = S3Blobs(s3, self.settings.bucket)
        # The store keeps its own (real) time for TTLs and ordering; only workflows see the env clock.
        self.store = _WaitingStore(DynamoEventStore(dynamodb, self.settings, blobs=blobs), self)
        self.urls = await create_queues(sqs, self.settings, visibility_timeout=self.visibility_timeout)
        transport = SqsTransport(sqs, self.urls, self.clock, max_delay=self.settings.timer_hop_max_delay)
        tracking = _TrackingTransport(transport, self.known, send_timers=self.clock.frozen_at is None)
        self.service = EnvService(self.registry, self.store, tracking, self.clock, public_url=TEST_PUBLIC_URL)
        self.service.patience, self.service.activity = self.patience, self._work_under_way
        self.client = Client(self.service)
        self.worker = Worker(self.service, transport, self.settings)
        self.pollers = [_CountingPoller(sqs, url, self._handle, wait_seconds=0, idle_delay=0.05)
                        for url in (self.urls.wake, self.urls.timers)]
        if not self.autorun:
            for poller in self.pollers:
                poller.pause()
        tracking.on_wake = self.pollers[0].kick  # pick up a new wake-up at once (see SqsPoller.kick)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(p.run()) for p in self.pollers]
        _deployments[self.store] = _Deployment(self.settings, self.clock.offset, self.clock.now(), self.known)
        if self._redeploy:  # a new deploy over existing actors: wake every one of them once
            for ref in list(self.known.values()):
                await tracking.wake(ref)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        deployment = _deployments.get(self.store)
        if deployment is not None:
            deployment.offset, deployment.now = self.clock.offset, self.clock.now()
        for poller in self.pollers:
            poller.stop()
        for task in self._tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for poller in self.pollers:
            await poller.drain(timeout=5.0)
        await self._stack.aclose()

    async def _handle(self, event: dict[str, Any], context: Any) -> Any:
        """The worker's handler, its waits on the clock marked as this invocation's (see `_settled`)."""
        party = object()
        self._handling[party] = len(event.get("Records") or [])
        sleeping_party.set(party)  # (this poller task's context only)
        try:
            return await self.worker.handle(event, context)
        finally:
            del self._handling[party]

    async def _work_under_way(self) -> tuple[bool, object]:
        """For a waiting send's patience (see EnvService): invocations or wake-up messages under way (a failed
        wake-up's messages come back after a real-time backoff), and what they have done."""
        busy = bool(self._handling) or bool(self.service.requests.open) or not await self._queues_empty()
        return busy, (len(self.worker.reports), len(self.worker.failures), self.clock.now())

    # -- TestEnv interface -----------------------------------------------------------------------------
    @property
    def failures(self) -> list[WakeFailure]:
        """Wake-ups that raised (their messages came back through SQS)."""
        return self.worker.failures

    @property
    def reports(self) -> list[WakeReport]:
        return self.worker.reports

    def now(self) -> float:
        return self.clock.now()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Let the pollers run while inside (nested uses count)."""
        self._activity += 1
        for poller in self.pollers:
            poller.resume()
        try:
            yield
        finally:
            self._activity -= 1
            if self._activity == 0 and not self.autorun:
                for poller in self.pollers:
                    poller.pause()

    async def run_until_idle(self, timeout: float = IDLE_TIMEOUT) -> None:
        """Wait until no wake-up message is visible or in flight; raise if one went to the DLQ."""
        async with self.running():
            await self._until_idle(timeout)

    async def _until_idle(self, timeout: float, *, clock_waits: bool = False) -> None:
        """Until no wake-up message is visible or in flight, or, with `clock_waits`, until what is still in
        flight belongs to worker invocations that wait for the clock (as TestEnv's settle). Idle means: no batch
        in hand, both queues' counts at zero, and then each poller finished a receive that started after the counts
        were read and found nothing, with no batch handled meanwhile. The counts alone are not enough: SQS's are
        approximate, and LocalStack's show a message that a receive is taking in neither the visible nor the
        in-flight count (seen: the env declared idle with a wake-up about to run)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            await asyncio.sleep(0)  # a send or call the test just started in a task gets to begin
            self._raise_poisoned()
            if not self.service.requests.open:
                if clock_waits and await self._settled():
                    return
                marks = [(p.receives_started, len(p.results)) for p in self.pollers]
                if (not any(p.busy for p in self.pollers) and await self._queues_empty()
                        and await self._found_nothing_since(marks, deadline)):
                    self._raise_poisoned()
                    return
            if loop.time() > deadline:
                raise TimeoutError(self._stuck(timeout))
            await asyncio.sleep(0.02)

    async def _settled(self) -> bool:
        """Nothing visible, and every message in flight is held by an invocation waiting for the clock."""
        now = self.clock.now()
        sleeping = self.clock.sleeping()
        if any(s.moment <= now for s in sleeping):
            return False  # a wait the clock just reached has yet to see it
        waiting = {s.party for s in sleeping}
        parties = list(self._handling)
        if not parties or any(party not in waiting for party in parties):
            return False
        held = sum(self._handling.values())
        for url in (self.urls.wake, self.urls.timers):
            counts = await self.queue_counts(url)
            if counts["visible"]:
                return False
            held -= counts["in_flight"]
        return held >= 0

    def _stuck(self, timeout: float) -> str:
        lines = [f"wake-ups still running after {timeout:g} s of real time."]
        if self._handling:
            lines.append("A step is still running: if it waits for something the test does later, do that "
                         "before waiting; a wake-up waiting for the virtual clock beside a running step is moved on "
                         "by advance(), which does not wait for the step (run_until_idle waits for every wake-up).")
        if self.service.requests.open:
            lines.append(f"{self.service.requests.open} client request(s) have not stored their message yet.")
        return " ".join(lines)

    async def _found_nothing_since(self, marks: list[tuple[int, int]], deadline: float) -> bool:
        """Whether every poller's next receive after `marks` found nothing while no batch was in hand."""
        loop = asyncio.get_running_loop()
        while True:
            if any(p.busy or len(p.results) != handled for p, (_, handled) in zip(self.pollers, marks, strict=True)):
                return False
            if all(p.last_empty_receive >= started for p, (started, _) in zip(self.pollers, marks, strict=True)):
                return True
            if loop.time() > deadline:
                return False
            await asyncio.sleep(0.005)

    async def advance(self, seconds: float) -> None:
        """Move the clock forward, waking each actor at each of its due times (deadlines, retries, scheduled
        actions, as the store records them) in time order, as TestEnv fires timers; run until idle."""
        async with self.running():
            await self._advance(seconds)

    async def _advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the clock cannot go back")
        target = self.clock.now() + seconds
        await self._until_idle(IDLE_TIMEOUT, clock_waits=True)
        fired: set[tuple[str, float]] = set()
        for _ in range(MAX_TIMER_STEPS):
            due = await self._next_due(fired)
            now = self.clock.now()
            waits = [s.moment for s in self.clock.sleeping() if s.moment > now]
            moment = min(waits + ([due[0]] if due is not None else []), default=None)
            if moment is None or moment > target:
                break
            self.clock.advance(max(0.0, moment - now))
            if due is not None and due[0] == moment:
                for ref in due[1]:
                    fired.add((ref.id, moment))
                    await self.service.transport.wake(ref)
            await self._until_idle(IDLE_TIMEOUT, clock_waits=True)
        self.clock.advance(max(0.0, target - self.clock.now()))
        await self._until_idle(IDLE_TIMEOUT, clock_waits=True)

    # -- helpers ---------------------------------------------------------------------------------------
    def _raise_poisoned(self) -> None:
        for poller in self.pollers:
            crashed = [r for r in poller.results if r.error is not None]
            if crashed:
                poller.results.clear()
                raise RuntimeError(f"the worker handler crashed: {crashed[0].error!r}") from crashed[0].error
        poisoned = [f for f in self.worker.failures if f.receive_count >= self.settings.max_receives]
        if len(poisoned) > self._reported_poison:
            failure = poisoned[self._reported_poison]
            self._reported_poison += 1
            raise WakeFailedError(f"wake-up of {failure.ref} failed {failure.receive_count} times: "
                                  f"{type(failure.error).__name__}: {failure.error}") from failure.error

    async def _queues_empty(self) -> bool:
        for url in (self.urls.wake, self.urls.timers):
            counts = await self.queue_counts(url)
            if counts["visible"] or counts["in_flight"]:
                return False
        return True

    async def _next_due(self, fired: set[tuple[str, float]]) -> tuple[float, list[ActorRef]] | None:
        """The earliest deadline, retry time or scheduled action among known actors, not fired yet."""
        moments: dict[float, list[ActorRef]] = {}
        for ref in list(self.known.values()):
            snapshot = await self.store.load(ref)
            if snapshot is None:
                continue
            times: list[float] = [m.not_before for m in snapshot.inbox if m.kind == "action" and m.not_before]
            if snapshot.workflow.state not in (WorkflowState.COMPLETED, WorkflowState.FAILED):
                times += [t for t in (snapshot.workflow.deadline, snapshot.workflow.retry_at) if t is not None]
            for moment in times:
                if (ref.id, moment) not in fired:
                    moments.setdefault(moment, []).append(ref)
        if not moments:
            return None
        first = min(moments)
        return first, moments[first]

    async def queue_counts(self, url: str) -> dict[str, int]:
        """Visible, in-flight and delayed messages of a queue (for tests)."""
        attributes = (await self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]))["Attributes"]
        return {"visible": int(attributes["ApproximateNumberOfMessages"]),
                "in_flight": int(attributes["ApproximateNumberOfMessagesNotVisible"]),
                "delayed": int(attributes["ApproximateNumberOfMessagesDelayed"])}



class _WaitingStore:
    """The env's store; a client waiting on it (for a response or events) lets the pollers run meanwhile."""

    def __init__(self, inner: DynamoEventStore, env: AwsTestEnv) -> None:
        self.inner = inner
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def inbox_ids(self, ref: ActorRef) -> list[str]:
        """Pending message ids, synchronously like MemoryEventStore.inbox_ids (read on a helper thread with
        its own client, as a test may call it between awaits)."""
        settings = self.inner.settings

        async def read() -> list[str]:
            async with DynamoEventStore.connect(settings, session=get_session()) as store:
                snapshot = await store.load(ref)
            return [m.id for m in snapshot.inbox] if snapshot is not None else []

        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, read()).result(timeout=30)

    async def wait_response(self, ref: ActorRef, message_id: str, timeout: float) -> tuple[bool, Any]:
        async with self._env.running():
            return await self.inner.wait_response(ref, message_id, timeout)

    async def wait_events(self, ref: ActorRef, after: int, timeout: float) -> list[EventRecord]:
        async with self._env.running():
            return await self.inner.wait_events(ref, after, timeout)
