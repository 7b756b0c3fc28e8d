"""Clocks (see dormant.ports.Clock): the system clock, and one that tests can move forward.

`sleep_until` is what an in-process wait of a wake-up awaits (a short sleep, a race timer beside a running
step). A clock that stands still unless moved (`realtime = False`) ends such a sleep only when it is moved
past the moment: the wake-up then never waits for time that will not pass by itself (docs/semantics.md).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable


class SystemClock:
    """Seconds since the epoch, from the operating system."""

    realtime = True

    def now(self) -> float:
        return time.time()

    async def sleep_until(self, moment: float) -> None:
        delay = moment - time.time()
        if delay > 0:
            await asyncio.sleep(delay)


class Sleepers:
    """Sleeps on a clock that jumps: each sleeper re-reads the clock when it is moved (thread-safe)."""

    def __init__(self) -> None:
        self._waiting: set[asyncio.Future[None]] = set()
        self._lock = threading.Lock()

    async def sleep_until(self, now: Callable[[], float], moment: float, *, realtime: bool) -> None:
        """Return once `now()` >= moment; with `realtime`, time also passes by itself meanwhile."""
        loop = asyncio.get_running_loop()
        while True:
            remaining = moment - now()
            if remaining <= 0:
                return
            future: asyncio.Future[None] = loop.create_future()
            with self._lock:
                self._waiting.add(future)
            try:
                if realtime:
                    await asyncio.wait([future], timeout=remaining)
                else:
                    await future
            finally:
                with self._lock:
                    self._waiting.discard(future)

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
