"""`TestEnv`: in-memory backends and a virtual clock, so a 24-hour timeout is tested in milliseconds.

    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("counter", ["main"])
        await handle.send("counter", {"delta": 1})
        await env.run_until_idle()
        await env.advance(24 * 3600)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import TracebackType

from dormant.actor import Registry
from dormant.client import Client
from dormant.errors import WakeFailedError
from dormant.memory import MemoryEventStore, MemoryTransport
from dormant.ports import ActorRef
from dormant.runtime.clocks import Sleepers
from dormant.runtime.service import ActorService
from dormant.runtime.wake import WakeReport, wake_actor

log = logging.getLogger("dormant.testing")
DEFAULT_START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
MAX_WAKE_FAILURES = 5


class VirtualClock:
    """A clock that only moves when told to (`set`, `advance`).

    A wake-up waiting in process beside a running step (a race timer, say) waits on this clock: moving
    it past the deadline ends the wait; `TestEnv.advance` moves it too."""

    realtime = False

    def __init__(self, start: float = DEFAULT_START) -> None:
        self._now = start
        self._sleepers = Sleepers()

    def now(self) -> float:
        return self._now

    def set(self, moment: float) -> None:
        if moment < self._now:
            raise ValueError("the virtual clock cannot go back")
        self._now = moment
        self._sleepers.moved()

    def advance(self, seconds: float) -> None:
        """Move the clock now, without waiting for anything (e.g. while a step is in flight)."""
        if seconds < 0:
            raise ValueError("the virtual clock cannot go back")
        self.set(self._now + seconds)

    async def sleep_until(self, moment: float) -> None:
        await self._sleepers.sleep_until(self.now, moment, realtime=False)


@dataclass
class WakeFailure:
    ref: ActorRef
    error: BaseException


@dataclass
class _Runner:
    """Runs due wake-ups as they appear: at most one wake-up per actor at a time (as an SQS FIFO group)."""

    service: ActorService
    transport: MemoryTransport
    clock: VirtualClock
    running: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    again: set[str] = field(default_factory=set)
    failures: list[WakeFailure] = field(default_factory=list)
    consecutive: dict[str, int] = field(default_factory=dict)
    reports: list[WakeReport] = field(default_factory=list)
    poisoned: list[WakeFailure] = field(default_factory=list)

    def kick(self) -> None:
        for ref in self.transport.pop_due(self.clock.now()):
            if ref.id in self.running:
                self.again.add(ref.id)  # wake it once more when the current wake-up ends
            else:
                self.running[ref.id] = asyncio.get_running_loop().create_task(self._wake(ref))

    async def _wake(self, ref: ActorRef) -> None:
        try:
            while True:
                self.again.discard(ref.id)
                try:
                    self.reports.append(await wake_actor(self.service, ref))
                    self.consecutive.pop(ref.id, None)
                except Exception as error:  # a crashed wake-up is redelivered, as SQS would
                    failure = WakeFailure(ref, error)
                    self.failures.append(failure)
                    count = self.consecutive[ref.id] = self.consecutive.get(ref.id, 0) + 1
                    log.info("wake-up of %s failed (%d): %s", ref, count, error)
                    if count >= MAX_WAKE_FAILURES:
                        self.poisoned.append(failure)
                        self.consecutive.pop(ref.id, None)
                        break
                    continue
                if ref.id not in self.again:
                    break
        finally:
            del self.running[ref.id]
            self.kick()

    async def until_idle(self) -> None:
        self.kick()
        while self.running:
            await asyncio.gather(*list(self.running.values()), return_exceptions=True)
            # Let call_soon kicks from the finished wake-ups run before looking again.
            await asyncio.sleep(0)
            self.kick()
        if self.poisoned:
            failure = self.poisoned.pop(0)
            raise WakeFailedError(f"wake-up of {failure.ref} failed {MAX_WAKE_FAILURES} times: "
                                  f"{type(failure.error).__name__}: {failure.error}") from failure.error


class TestEnv:
    """In-memory store and transport, a virtual clock, and a client; wake-ups run by themselves."""

    __test__ = False  # not a pytest test class

    def __init__(self, registry: Registry, *, store: MemoryEventStore | None = None,
                 start: float | None = None) -> None:
        self.registry = registry
        self.store = store if store is not None else MemoryEventStore()
        self.clock = VirtualClock(start if start is not None else DEFAULT_START)
        if store is not None:
            self.clock = VirtualClock(max(self.clock.now(), _latest_time(store)))
        self.transport = MemoryTransport()
        self.service = ActorService(registry, self.store, self.transport, self.clock)
        self.client = Client(self.service)
        self._runner = _Runner(self.service, self.transport, self.clock)

    async def __aenter__(self) -> TestEnv:
        loop = asyncio.get_running_loop()
        def schedule_kick() -> None:
            loop.call_soon(self._runner.kick)

        self.transport.on_wake = schedule_kick
        if self.store.actor_ids():
            # A new deploy over existing actors: wake every one of them once.
            for actor_id in self.store.actor_ids():
                snapshot_ref = _ref_from_store(self.store, actor_id)
                if snapshot_ref is not None:
                    await self.transport.wake(snapshot_ref)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.transport.on_wake = None
        for task in list(self._runner.running.values()):
            task.cancel()
        await asyncio.gather(*self._runner.running.values(), return_exceptions=True)

    @property
    def failures(self) -> list[WakeFailure]:
        """Wake-ups that raised (each was retried, as SQS redelivers)."""
        return self._runner.failures

    @property
    def reports(self) -> list[WakeReport]:
        return self._runner.reports

    def now(self) -> float:
        return self.clock.now()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Wake-ups run while inside (here they always do; AwsTestEnv runs its pollers only inside), e.g.
        `async with env.running(): await started.wait()` to let a step begin before moving the clock."""
        yield

    async def run_until_idle(self) -> None:
        """Run wake-ups until nothing is due at the current virtual time."""
        await self._runner.until_idle()

    async def advance(self, seconds: float) -> None:
        """Move the clock forward, firing each due timer in time order, and run until idle."""
        target = self.clock.now() + seconds
        await self.run_until_idle()
        while True:
            upcoming = self.transport.next_time()
            if upcoming is None or upcoming > target:
                break
            self.clock.set(max(self.clock.now(), upcoming))
            await self.run_until_idle()
        self.clock.set(target)
        await self.run_until_idle()


def _latest_time(store: MemoryEventStore) -> float:
    latest = 0.0
    for actor_id in store.actor_ids():
        record = store._actors[actor_id]
        latest = max(latest, float(record.meta.get("created_at", 0.0)))
        for entry in record.history.values():
            latest = max(latest, float(entry.get("updated_at", 0.0)))
    return latest


def _ref_from_store(store: MemoryEventStore, actor_id: str) -> ActorRef | None:
    meta = store._actors[actor_id].meta
    return ActorRef(name=meta["name"], key=tuple(meta["key"]))
