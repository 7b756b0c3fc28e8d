"""`AwsTestEnv`: the interface of dormant.testing.TestEnv, running on a DynamoDB-compatible server, SQS and
the poller that plays Lambda's event source (the worker runs in-process, on the same event loop).

    async with AwsTestEnv(registry) as env:          # settings from the environment (AWS_ENDPOINT_URL, ...)
        handle = env.client.get_or_create("counter", ["main"])
        await handle.send("counter", {"delta": 1})
        await env.run_until_idle()
        await env.advance(3600)                      # timers due in the hour fire in time order
    async with AwsTestEnv(registry, store=env.store) as again:   # a new deploy over the stored actors
        ...

The clock is real time plus an offset that `advance()` moves, so real SQS delays still pass. Every actor
the env has seen is tracked; `advance()` steps the clock to each due deadline (read from the store) in
order and wakes the actors due then, then wakes every known actor at the target time (early or stale
wake-ups are harmless). `run_until_idle()` waits until both queues hold no visible or in-flight message;
delayed timer messages are not waited for (they belong to the future, as in TestEnv).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
import weakref
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from dormant.actor import Registry
from dormant.backends.aws_store import DynamoEventStore, client_config, create_table
from dormant.backends.aws_transport import QueueUrls, SqsTransport, create_queues
from dormant.client import Client
from dormant.clocks import OffsetClock
from dormant.errors import WakeFailedError
from dormant.metering import Meter, instrument
from dormant.poller import SqsPoller
from dormant.ports import ActorRef, EventStore
from dormant.runtime import WakeReport
from dormant.service import ActorService
from dormant.settings import Settings
from dormant.worker import WakeFailure, Worker
from dormant.workflow.history import WorkflowState

IDLE_TIMEOUT = 60.0
MAX_TIMER_STEPS = 10_000


@dataclass
class _Deployment:
    """What a later AwsTestEnv(store=...) over the same store inherits (a redeploy keeps table and queues)."""

    settings: Settings
    offset: float
    known: dict[str, ActorRef] = field(default_factory=dict)


_deployments: weakref.WeakKeyDictionary[Any, _Deployment] = weakref.WeakKeyDictionary()


class _TrackingTransport:
    """The SQS transport, remembering every actor it wakes (the env's list of known actors)."""

    def __init__(self, inner: SqsTransport, known: dict[str, ActorRef]) -> None:
        self.inner = inner
        self.known = known
        self.on_wake: Callable[[], None] | None = None

    async def wake(self, ref: ActorRef, *, at: float | None = None, reason: str | None = None) -> None:
        self.known.setdefault(ref.id, ref)
        await self.inner.wake(ref, at=at, reason=reason)
        if self.on_wake is not None and (at is None or at <= self.inner.clock.now()):
            self.on_wake()


class AwsTestEnv:
    """TestEnv on DynamoDB + SQS + the poller; see the module docstring."""

    __test__ = False

    def __init__(self, registry: Registry, *, store: EventStore | None = None, settings: Settings | None = None,
                 visibility_timeout: int = 1, max_receives: int = 5, hop_max_delay: int | None = None) -> None:
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
                "fifo_dlq_name": f"dlq-{suffix}.fifo", "max_receives": max_receives})
        if hop_max_delay is not None:
            base = base.model_copy(update={"timer_hop_max_delay": hop_max_delay})
        self.settings = base
        self.visibility_timeout = visibility_timeout
        self.clock = OffsetClock(previous.offset if previous else 0.0)
        self.known: dict[str, ActorRef] = dict(previous.known) if previous else {}
        self._redeploy = previous is not None
        self.meter = Meter()
        self._stack = AsyncExitStack()
        self._tasks: list[asyncio.Task[None]] = []
        self._reported_poison = 0
        # Set in __aenter__:
        self.store: EventStore
        self.urls: QueueUrls
        self.service: ActorService
        self.client: Client
        self.worker: Worker
        self.pollers: list[SqsPoller] = []
        self._sqs: Any = None

    # -- lifecycle -------------------------------------------------------------------------------------
    async def __aenter__(self) -> AwsTestEnv:
        from aiobotocore.session import get_session  # type: ignore[import-untyped]

        session = get_session()
        clients = [await self._stack.enter_async_context(session.create_client(
            service, config=client_config(), **self.settings.client_kwargs(service))) for service in ("dynamodb", "sqs")]
        for client in clients:
            instrument(client, always=self.meter)
        dynamodb, sqs = clients
        self._sqs = sqs
        await create_table(dynamodb, self.settings)
        self.store = DynamoEventStore(dynamodb, self.settings, clock=self.clock.now)
        self.urls = await create_queues(sqs, self.settings, visibility_timeout=self.visibility_timeout)
        transport = SqsTransport(sqs, self.urls, self.clock, max_delay=self.settings.timer_hop_max_delay)
        tracking = _TrackingTransport(transport, self.known)
        self.service = ActorService(self.registry, self.store, tracking, self.clock)
        self.client = Client(self.service)
        self.worker = Worker(self.service, transport)
        self.pollers = [SqsPoller(sqs, self.urls.wake, self.worker.handle, wait_seconds=1),
                        SqsPoller(sqs, self.urls.timers, self.worker.handle, wait_seconds=1)]
        tracking.on_wake = self.pollers[0].kick  # pick up a new wake-up at once (see SqsPoller.kick)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(p.run()) for p in self.pollers]
        _deployments[self.store] = _Deployment(self.settings, self.clock.offset, self.known)
        if self._redeploy:  # a new deploy over existing actors: wake every one of them once
            for ref in list(self.known.values()):
                await tracking.wake(ref)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        deployment = _deployments.get(self.store)
        if deployment is not None:
            deployment.offset = self.clock.offset
        for poller in self.pollers:
            poller.stop()
        for task in self._tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for poller in self.pollers:
            await poller.drain(timeout=5.0)
        await self._stack.aclose()

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

    async def run_until_idle(self, timeout: float = IDLE_TIMEOUT) -> None:
        """Wait until no wake-up message is visible or in flight; raise if one went to the DLQ."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            self._raise_poisoned()
            if not any(p.busy for p in self.pollers) and await self._queues_empty():
                self._raise_poisoned()
                return
            if loop.time() > deadline:
                raise TimeoutError(f"wake-ups still running after {timeout} s")
            await asyncio.sleep(0.02)

    async def advance(self, seconds: float) -> None:
        """Move the clock forward: each due deadline in time order, then the target; run until idle."""
        target = self.clock.now() + seconds
        await self.run_until_idle()
        fired: set[tuple[str, float]] = set()
        for _ in range(MAX_TIMER_STEPS):
            due = await self._next_due(fired)
            if due is None or due[0] > target:
                break
            moment, refs = due
            self.clock.advance(max(0.0, moment - self.clock.now()))
            for ref in refs:
                fired.add((ref.id, moment))
                await self.service.transport.wake(ref)
            await self.run_until_idle()
        self.clock.advance(max(0.0, target - self.clock.now()))
        for ref in list(self.known.values()):
            await self.service.transport.wake(ref)
        await self.run_until_idle()

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

