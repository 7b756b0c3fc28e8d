"""The runtime's clock: real time, or a test's virtual one."""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    @property
    def realtime(self) -> bool:
        """True when time passes by itself (the system clock); False for a test clock that stands still
        unless moved: a wake-up then never waits in process for time to pass with nothing else running."""
        ...

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    async def sleep_until(self, moment: float) -> None:
        """Return once `now()` has reached `moment` (a clock that stands still: once it is moved there)."""
        ...
