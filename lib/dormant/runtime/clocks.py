"""Clocks (see dormant.ports.Clock): the system clock, and one that tests can move forward.

`sleep_until` is what an in-process wait of a wake-up awaits (a short sleep, a race timer beside a running
step). A clock that stands still unless moved (`realtime = False`) ends such a sleep only when it is moved
past the moment: the wake-up then never waits for time that will not pass by itself (docs/semantics.md).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


class SystemClock:
    """Seconds since the epoch, from the operating system."""

    realtime = True

    def now(self) -> float:
        return time.time()

    async def sleep_until(self, moment: float) -> None:
        delay = moment - time.time()
        if delay > 0:
            await asyncio.sleep(delay)


sleeping_party: contextvars.ContextVar[object | None] = contextvars.ContextVar("sleeping_party", default=None)
"""Who a sleep on a clock that jumps belongs to, as its test harness sees it (e.g. the wake-up whose task set
it: tasks started inside inherit it). `Sleepers.pending` reports it beside each sleeper's moment, so the harness
can tell a wake-up that waits for the clock from one that is busy, and which moment to move the clock to."""


@dataclass(frozen=True)
class Sleeper:
    """A sleep in progress: until `moment`, on behalf of `party` (see `sleeping_party`)."""

    moment: float
    party: object | None


class Sleepers:
    """Sleeps on a clock that jumps: each sleeper re-reads the clock when it is moved (thread-safe)."""

    def __init__(self) -> None:
        self._waiting: dict[asyncio.Future[None], Sleeper] = {}
        self._lock = threading.Lock()

    async def sleep_until(self, now: Callable[[], float], moment: float, *, realtime: bool) -> None:
        """Return once `now()` >= moment; with `realtime`, time also passes by itself meanwhile."""
        loop = asyncio.get_running_loop()
        sleeper = Sleeper(moment, sleeping_party.get())
        while True:
            remaining = moment - now()
            if remaining <= 0:
                return
            future: asyncio.Future[None] = loop.create_future()
            with self._lock:
                self._waiting[future] = sleeper
            try:
                if realtime:
                    await asyncio.wait([future], timeout=remaining)
                else:
                    await future
            finally:
                with self._lock:
                    self._waiting.pop(future, None)

    def pending(self) -> list[Sleeper]:
        """The sleeps in progress (each one's moment is still ahead of the clock, unless it just moved)."""
        with self._lock:
            return list(self._waiting.values())

    def moved(self) -> None:
        """The clock moved: every sleeper looks at it again."""
        with self._lock:
            waiting = list(self._waiting)
        for future in waiting:
            loop = future.get_loop()
            if loop.is_closed():
                continue
            loop.call_soon_threadsafe(_wake, future)



def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class OffsetClock:
    """A clock tests can move forward: real time plus an offset that only grows, or, when `frozen_at` is
    given, that moment plus the offset (time stands still unless advanced, as in TestEnv)."""

    def __init__(self, offset: float = 0.0, *, frozen_at: float | None = None) -> None:
        self._offset = offset
        self.frozen_at = frozen_at
        self._lock = threading.Lock()  # workers may read it from their own threads
        self._sleepers = Sleepers()

    @property
    def offset(self) -> float:
        return self._offset

    @property
    def realtime(self) -> bool:
        return self.frozen_at is None

    def now(self) -> float:
        return (time.time() if self.frozen_at is None else self.frozen_at) + self._offset

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the clock cannot go back")
        with self._lock:
            self._offset += seconds
        self._sleepers.moved()

    async def sleep_until(self, moment: float) -> None:
        await self._sleepers.sleep_until(self.now, moment, realtime=self.realtime)

    def sleeping(self) -> list[Sleeper]:
        """The sleeps on this clock in progress (a test harness reads them: see `sleeping_party`)."""
        return self._sleepers.pending()
