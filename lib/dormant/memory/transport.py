"""The in-memory Transport: wake-ups in a time-ordered heap, drained by TestEnv's and `dormant dev`'s runner."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from dormant.ports import ActorRef, Creation, InboxMessage


@dataclass
class Carried:
    """What due wake-ups of one actor carry (see Transport.wake): its runner stores what is missing."""

    messages: list[InboxMessage] = field(default_factory=list)
    creation: Creation | None = None
    ids: set[str] = field(default_factory=set)  # of `messages`: a burst of sends is not quadratic


class MemoryTransport:
    """Wake-ups in a time-ordered heap; a runner (TestEnv, `dormant dev`) drains what is due.

    Like SQS, a wake-up carries the message (and creation) of the request that sent it, handed to the
    runner with the wake-up (`take_carried`)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, ActorRef, InboxMessage | None, Creation | None]] = []
        self._scheduled: set[tuple[str, float]] = set()
        self._counter = itertools.count()
        self._carried: dict[str, Carried] = {}
        self.on_wake: Callable[[], None] | None = None

    async def wake(self, ref: ActorRef, *, at: float | None = None, reason: str | None = None,
                   message: InboxMessage | None = None, creation: Creation | None = None) -> None:
        moment = float("-inf") if at is None else at
        if (ref.id, moment) in self._scheduled and message is None and creation is None:
            return  # the same timer twice is one timer
        self._scheduled.add((ref.id, moment))
        heapq.heappush(self._heap, (moment, next(self._counter), ref, message, creation))
        if self.on_wake is not None:
            self.on_wake()

    def take_carried(self, ref: ActorRef) -> Carried | None:
        """What the wake-ups of `ref` handed out so far carried (cleared: the runner stores it); None: nothing."""
        return self._carried.pop(ref.id, None)

    def pop_due(self, now: float) -> list[ActorRef]:
        due: dict[str, ActorRef] = {}
        while self._heap and self._heap[0][0] <= now:
            moment, _, ref, message, creation = heapq.heappop(self._heap)
            self._scheduled.discard((ref.id, moment))
            due.setdefault(ref.id, ref)
            if message is not None or creation is not None:
                carried = self._carried.get(ref.id)
                if carried is None:  # (not setdefault: that would make one per wake-up popped)
                    carried = self._carried[ref.id] = Carried()
                if message is not None and message.id not in carried.ids:
                    carried.ids.add(message.id)
                    carried.messages.append(message)
                carried.creation = carried.creation or creation
        return list(due.values())

    def next_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None
