"""Per-caller limits of the HTTP API: the long requests (send with wait=true, events long-polls) one caller
holds open at once in one API process (on Lambda each container serves one request at a time: there the
API's reserved concurrency bounds them)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from dormant.http.errors import ApiError
from dormant.workflow.caller import Caller


class WaitLimiter:
    """At most `limit` long requests per caller at once in this process; the next one is 429 `too_many_waits`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: Counter[str] = Counter()

    @asynccontextmanager
    async def hold(self, caller: Caller) -> AsyncIterator[None]:
        key = str(caller)
        if self._open[key] >= self.limit:
            raise ApiError(429, "too_many_waits", f"{caller} already holds {self.limit} waiting requests open "
                                                  "(send with wait=true, events with wait): retry later",
                           headers={"Retry-After": "1"})
        self._open[key] += 1
        try:
            yield
        finally:
            self._open[key] -= 1
            if not self._open[key]:
                del self._open[key]
