"""`TestEnv`: in-memory backends and a virtual clock, so a 24-hour timeout is tested in milliseconds.

    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("counter", ["main"])
        await handle.send("counter", {"delta": 1})
        await env.run_until_idle()
        await env.advance(24 * 3600)

docs/testing.md is the guide: the virtual clock, `advance`, `run_until_idle`, `running()`, redeploys over
`store=` and waiting sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from dormant.actor import Registry
from dormant.client import Client
from dormant.errors import WakeFailedError
from dormant.memory.store import MemoryEventStore
from dormant.memory.transport import Carried, MemoryTransport
from dormant.models import SendResult
from dormant.ports import ActorRef
from dormant.runtime.clocks import Sleeper, Sleepers, sleeping_party
from dormant.runtime.service import ActorService
from dormant.runtime.wake import WakeReport, wake_actor

log = logging.getLogger("dormant.testing")
DEFAULT_START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
MAX_WAKE_FAILURES = 5
PATIENCE = 10.0
"""Real seconds a test env waits on something that makes no progress before it raises TimeoutError saying what
holds it: `run_until_idle`/`advance` on wake-ups that neither finish nor touch the store (a step that waits for
something the test would only do later), a waiting send on an env where nothing runs and the clock stands."""
POLL = 0.005  # real seconds between looks at wake-ups that may start waiting on the clock
TEST_PUBLIC_URL = "https://dormant.test"  # callback URLs under TestEnv (.test is reserved for tests: RFC 2606)


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

    def sleeping(self) -> list[Sleeper]:
        """Waits on this clock in progress: wake-ups waiting in process, waiting sends (`send(wait=True)`)."""
        return self._sleepers.pending()


class Requests:
    """Client requests under way that have not stored what they send yet (see EnvService)."""

    def __init__(self) -> None:
        self.open = 0

    def opened(self) -> _Opened:
        """`with requests.opened():` a request under way until it stores what it sends (or ends)."""
        return _Opened(self)


class _Opened:
    """Requests.opened's context manager (a class: a generator-based one costs a send several microseconds)."""

    __slots__ = ("_closed", "_requests")

    def __init__(self, requests: Requests) -> None:
        self._requests = requests

    def __enter__(self) -> None:
        self._requests.open += 1
        self._closed = _request.set(_OpenRequest(self._requests))

    def __exit__(self, *exc: object) -> None:
        _request.get().close()
        _request.reset(self._closed)


@dataclass
class _OpenRequest:
    requests: Requests
    done: bool = False

    def close(self) -> None:
        if not self.done:
            self.done = True
            self.requests.open -= 1


_NO_REQUEST = _OpenRequest(Requests(), done=True)
_request: contextvars.ContextVar[_OpenRequest] = contextvars.ContextVar("dormant_testing_request",
                                                                        default=_NO_REQUEST)


Activity = Callable[[], Awaitable[tuple[bool, object]]]
"""A test env's activity: (whether a wake-up or request is under way, a reading that changes with progress)."""


class EnvService(ActorService):
    """The ActorService of a test env: it counts the requests under way (sends, calls, creations) until they
    have stored what they send, so that `run_until_idle()` waits for a send started in a task just before it.
    A waiting send counts only until its message is stored: its wait is not work the env could finish.

    With `patience` and `activity` set (the env sets them), a waiting send that nothing in the env can answer
    any more (no wake-up or request under way, the clock unmoved, for `patience` real seconds) raises
    TimeoutError saying what the actor waits for, instead of waiting on a clock that only the test moves."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests = Requests()
        self.patience: float | None = None
        self.activity: Activity | None = None

    async def send(self, *args: Any, **kwargs: Any) -> SendResult:
        with self.requests.opened():
            return await super().send(*args, **kwargs)

    async def send_many(self, *args: Any, **kwargs: Any) -> list[SendResult]:
        with self.requests.opened():
            return await super().send_many(*args, **kwargs)

    async def await_reply(self, ref: ActorRef, message_id: str, timeout: float) -> SendResult:
        _request.get().close()  # stored: from here on the request only waits
        waiting = asyncio.ensure_future(super().await_reply(ref, message_id, timeout))
        if self.patience is None or self.activity is None:
            return await waiting
        activity, patience = self.activity, self.patience
        mark, since = (await activity())[1], time.monotonic()
        try:
            while True:
                done, _ = await asyncio.wait([waiting], timeout=max(POLL, min(1.0, patience / 10)))
                if done:
                    return waiting.result()
                busy, reading = await activity()
                if busy or reading != mark:
                    mark, since = reading, time.monotonic()
                elif time.monotonic() - since >= patience:
                    break
        finally:
            if not waiting.done():
                waiting.cancel()
                await asyncio.gather(waiting, return_exceptions=True)
        status = await self.status(ref)
        wants = ", ".join(status.waiting_for.queues) or "nothing from a queue"
        until = "" if status.waiting_for.deadline is None else \
            f", until {status.waiting_for.deadline - self.clock.now():g} s from now on the virtual clock"
        raise TimeoutError(
            f"send(wait=True) of message {message_id} to {ref}: for {patience:g} s of real time nothing in the env "
            f"ran and the clock did not move, so no answer can come. The actor is {status.workflow.value}, "
            f"waiting for {wants}{until}. The clock moves only when the test moves it: if the answer needs time to "
            "pass, start the send in a task (asyncio.create_task(handle.send(..., wait=True))) and call "
            "env.advance(seconds); if it needs another message, send that first. See docs/testing.md.")

    async def call(self, *args: Any, **kwargs: Any) -> Any:
        with self.requests.opened():
            return await super().call(*args, **kwargs)

    async def create_actor(self, *args: Any, **kwargs: Any) -> bool:
        with self.requests.opened():
            return await super().create_actor(*args, **kwargs)

    async def deliver(self, *args: Any, **kwargs: Any) -> None:
        with self.requests.opened():
            await super().deliver(*args, **kwargs)


@dataclass
class WakeFailure:
    ref: ActorRef
    error: BaseException


@dataclass
class _Runner:
    """Runs due wake-ups as they appear: at most one wake-up per actor at a time (as an SQS FIFO group)."""

    service: EnvService
    transport: MemoryTransport
    clock: VirtualClock
    store: MemoryEventStore
    patience: float | None
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
        sleeping_party.set(ref.id)  # its waits on the clock say whose they are (this task's context only)
        carried = Carried()  # what the wake-ups carried, kept until a wake-up succeeds (as SQS redelivers)
        try:
            while True:
                self.again.discard(ref.id)
                more = self.transport.take_carried(ref)
                if more is not None:
                    for message in more.messages:
                        if message.id not in carried.ids:
                            carried.ids.add(message.id)
                            carried.messages.append(message)
                    carried.creation = carried.creation or more.creation
                try:
                    self.reports.append(await wake_actor(self.service, ref, messages=carried.messages,
                                                         creation=carried.creation))
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
                carried = Carried()  # (delivered: the next wake-up carries only what arrives for it)
        finally:
            del self.running[ref.id]
            self.kick()

    def waiting_on_clock(self) -> set[object | None]:
        """Who waits for a moment still ahead of the clock (wake-ups by actor id; None: the test's own)."""
        now = self.clock.now()
        return {s.party for s in self.clock.sleeping() if s.moment > now}

    async def settle(self, what: str, *, clock_waits: bool) -> None:
        """Run due wake-ups until every one has finished or, with `clock_waits`, waits for the virtual clock
        (an in-process wait beside a running step: a race timer, a queue wait): only moving the clock ends
        those. Requests under way (a send started in a task) are waited for first."""
        watch = _Progress(self, what)
        await asyncio.sleep(0)  # tasks the test just started (a send, a call) get to run up to their first wait
        turned = False  # whether the wake-ups under way had one turn of the loop since the last wait for them
        while True:
            self.kick()
            now = self.clock.now()
            if any(s.moment <= now for s in self.clock.sleeping()):
                watch.check()
                await asyncio.sleep(0)
                continue  # a wait the clock just reached has yet to see it
            waiting = self.waiting_on_clock() if clock_waits else set()
            busy = [task for actor_id, task in self.running.items() if actor_id not in waiting]
            if not busy and not self.service.requests.open:
                break
            if busy and not turned:
                # A wake-up that waits for nothing (the memory store answers at once) runs to its end in one turn:
                # looked at again after it (the kick above starts what it made due), with no timer and no done
                # callbacks of a wait; one still running then is waited for.
                turned = True
                await asyncio.sleep(0)
                continue
            turned = False
            if busy:
                await asyncio.wait(busy, timeout=POLL if clock_waits else watch.slice())
            else:
                await asyncio.sleep(POLL)
            watch.check()
        if self.poisoned:
            failure = self.poisoned.pop(0)
            raise WakeFailedError(f"wake-up of {failure.ref} failed {MAX_WAKE_FAILURES} times: "
                                  f"{type(failure.error).__name__}: {failure.error}") from failure.error

    def next_moment(self) -> float | None:
        """The earliest timer or in-process wait still ahead of the clock."""
        now = self.clock.now()
        moments = [s.moment for s in self.clock.sleeping() if s.moment > now]
        upcoming = self.transport.next_time()
        if upcoming is not None:
            moments.append(upcoming)
        return min(moments) if moments else None


class _Progress:
    """Raises TimeoutError when wake-ups have run `patience` real seconds without finishing or touching the
    store: a step that waits for something the test does only later would otherwise hang the test."""

    def __init__(self, runner: _Runner, what: str) -> None:
        self._runner = runner
        self._what = what
        self._mark = self._reading()
        self._since = time.monotonic()

    def _reading(self) -> tuple[int, int, int, float]:
        runner = self._runner
        return runner.store.calls, len(runner.reports), len(runner.failures), runner.clock.now()

    def slice(self) -> float | None:
        return None if self._runner.patience is None else max(POLL, self._runner.patience / 10)

    def check(self) -> None:
        reading = self._reading()
        if reading != self._mark:
            self._mark, self._since = reading, time.monotonic()
            return
        patience = self._runner.patience
        if patience is None or time.monotonic() - self._since < patience:
            return
        runner = self._runner
        waiting = runner.waiting_on_clock()
        stuck = sorted(runner.running)
        clocked = [actor_id for actor_id in stuck if actor_id in waiting]
        lines = [f"{self._what}: wake-ups of {', '.join(stuck) or 'nothing'} ran {patience:g} s of real time "
                 "without finishing or touching the store."]
        if clocked:
            lines.append(f"{', '.join(clocked)} wait(s) for the virtual clock beside a running step: "
                         "await env.advance(seconds) moves it without waiting for the step (run_until_idle waits "
                         "for every wake-up to finish).")
        if runner.service.requests.open:
            lines.append(f"{runner.service.requests.open} client request(s) have not stored their message yet.")
        lines.append("A step is still running: if it waits for something the test does later, do that before "
                     "waiting (or in a task: asyncio.create_task(env.run_until_idle())). Time inside a step is "
                     "real time; TestEnv(patience=None) waits forever. See docs/testing.md.")
        raise TimeoutError(" ".join(lines))


class TestEnv:
    """In-memory store and transport, a virtual clock, and a client; wake-ups run by themselves.

    `patience`: real seconds `run_until_idle()` and `advance()` wait for wake-ups that make no progress, and a
    waiting send waits while nothing in the env runs and the clock stands, before raising TimeoutError with what
    holds them (None: no limit). `public_url`: the base of callback URLs (`cb.url`)."""

    __test__ = False  # not a pytest test class

    def __init__(self, registry: Registry, *, store: MemoryEventStore | None = None,
                 start: float | None = None, patience: float | None = PATIENCE,
                 public_url: str | None = TEST_PUBLIC_URL) -> None:
        self.registry = registry
        self.store = store if store is not None else MemoryEventStore()
        self.clock = VirtualClock(start if start is not None else DEFAULT_START)
        if store is not None:
            self.clock = VirtualClock(max(self.clock.now(), _latest_time(store)))
        self.transport = MemoryTransport()
        self.service = EnvService(registry, self.store, self.transport, self.clock, public_url=public_url)
        self.client = Client(self.service)
        self._runner = _Runner(self.service, self.transport, self.clock, self.store, patience)
        self.service.patience, self.service.activity = patience, self._work_under_way

    async def _work_under_way(self) -> tuple[bool, object]:
        runner = self._runner
        upcoming = self.transport.next_time()
        due = upcoming is not None and upcoming <= self.clock.now()
        return bool(runner.running) or bool(self.service.requests.open) or due, \
            (len(runner.reports), len(runner.failures), self.clock.now())

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
        """Run wake-ups until none is running and nothing is due at the current virtual time (a send or call
        started in a task is waited for too). Steps run to their end, however long they take in real time."""
        await self._runner.settle("run_until_idle()", clock_waits=False)

    async def advance(self, seconds: float) -> None:
        """Move the clock forward by `seconds`, stopping at each timer and in-process wait in time order (fired
        timers wake their actors; a waiting send times out at its deadline), running wake-ups at each stop.

        At each stop it waits until every wake-up has finished or waits for the clock: a step running beside
        a race timer or a queue wait does not hold the clock (the timer can win), while a step on its own is
        waited for. Wake-ups still waiting for later moments keep running when it returns."""
        if seconds < 0:
            raise ValueError("the virtual clock cannot go back")
        what = f"advance({seconds:g})"
        target = self.clock.now() + seconds
        await self._runner.settle(what, clock_waits=True)
        while True:
            upcoming = self._runner.next_moment()
            if upcoming is None or upcoming > target:
                break
            self.clock.set(max(self.clock.now(), upcoming))
            await self._runner.settle(what, clock_waits=True)
        self.clock.set(target)
        await self._runner.settle(what, clock_waits=True)


def _latest_time(store: MemoryEventStore) -> float:
    return store.latest_time()


def _ref_from_store(store: MemoryEventStore, actor_id: str) -> ActorRef | None:
    return store.ref_of(actor_id)
