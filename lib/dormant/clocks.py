"""Clocks (see dormant.ports.Clock): the system clock, and one that tests can move forward."""

from __future__ import annotations

import threading
import time


class SystemClock:
    """Seconds since the epoch, from the operating system."""

    def now(self) -> float:
        return time.time()


class OffsetClock:
    """Real time plus an offset that only grows: tests skip ahead while real SQS delays still pass."""

    def __init__(self, offset: float = 0.0) -> None:
        self._offset = offset
        self._lock = threading.Lock()  # workers may read it from their own threads

    @property
    def offset(self) -> float:
        return self._offset

    def now(self) -> float:
        return time.time() + self._offset

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the clock cannot go back")
        with self._lock:
            self._offset += seconds
