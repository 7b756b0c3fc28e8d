"""Clocks (see dormant.ports.Clock): the system clock, and one that tests can move forward."""

from __future__ import annotations

import threading
import time


class SystemClock:
    """Seconds since the epoch, from the operating system."""

    def now(self) -> float:
        return time.time()


class OffsetClock:
    """A clock tests can move forward: real time plus an offset that only grows, or, when `frozen_at` is
    given, that moment plus the offset (time stands still unless advanced, as in TestEnv)."""

    def __init__(self, offset: float = 0.0, *, frozen_at: float | None = None) -> None:
        self._offset = offset
        self.frozen_at = frozen_at
        self._lock = threading.Lock()  # workers may read it from their own threads

    @property
    def offset(self) -> float:
        return self._offset

    def now(self) -> float:
        return (time.time() if self.frozen_at is None else self.frozen_at) + self._offset

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the clock cannot go back")
        with self._lock:
            self._offset += seconds
