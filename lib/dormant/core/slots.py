"""What a step asking for its flow-control limit and a store say to each other (EventStore.acquire_slot and
friends; dormant.core.flow declares the limits, dormant.memory.slots and dormant.dynamodb.slots enforce them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dormant.core.records import ActorRef

DEFAULT_PRIORITY = 3
"""A step's priority in a limit's line when it names none (`ctx.step(..., priority=1..5)`: 1 is served first)."""
DEFAULT_AGING = 30.0
"""Seconds of waiting that are worth one priority level (dormant.core.flow.Limit's `aging`)."""


@dataclass(frozen=True)
class LimitRule:
    """A declared limit (dormant.core.flow.Limit) as a store enforces it; for a keyed limit, the part of one key
    (`key`): each key has slots, rate windows and a line of its own."""

    name: str
    concurrency: int | None  # steps at once; None: no concurrency limit
    window: float  # seconds of one rate window, aligned on the clock (epoch multiples)
    per_window: int | None  # starts per window; None: no rate limit
    key: str | None = None  # a keyed limit's key (`ctx.step(..., limit_key=...)`); None: the limit is not keyed
    aging: float = DEFAULT_AGING  # seconds a waiter waits to rise one priority level


def line_rank(since: float, priority: int, aging: float) -> float:
    """A waiter's place in a limit's line (lowest first): when it began waiting, moved by its priority, a level
    (1 to 5, 3 when the step names none) worth `aging` seconds. FIFO within a priority, and a waiter of priority p
    is never passed by one that began waiting more than (p - 1) * aging seconds after it (its wait ages it up).
    The default priority's rank is `since` itself: lines stored before priorities keep their order."""
    return since + (priority - DEFAULT_PRIORITY) * aging


# SlotRequest and SlotLease are made for every limited step: slotted, not frozen (a frozen dataclass's __init__ costs
# several times a plain one's, on the hot path of flow control); nothing changes them once made.
@dataclass(slots=True)
class SlotRequest:
    """A step asking for its limit, right before its body runs. Times are on the runtime's clock."""

    rule: LimitRule
    ref: ActorRef  # whose step: woken when a slot frees while it waits
    holder: str  # the step: its actor's id and location (a re-run after a crash is the same holder)
    now: float
    lease_until: float  # the slot's expiry if granted
    queued_since: float  # when the step began waiting for the limit (`now` if it has not): its place in line
    queued: bool  # it waited before: its waiter item goes once it has the slot
    priority: int = DEFAULT_PRIORITY  # 1 (served first) to 5

    @property
    def rank(self) -> float:
        """Its place in the line (dormant.core.slots.line_rank)."""
        return line_rank(self.queued_since, self.priority, self.rule.aging)


@dataclass(slots=True)
class SlotLease:
    """A granted request: the slot held (None for a limit without concurrency: nothing to release)."""

    limit: str
    holder: str
    actor: str  # the holder's actor id (shown to operators)
    slot: int | None
    expires: float
    key: str | None = None  # a keyed limit's key: the slot is one of that key's


@dataclass(frozen=True)
class SlotRefusal:
    """A refused request. By concurrency: every slot is held, the first lease ends at `free_at`, and the request is
    in the limit's line of waiters (a release wakes the oldest). By rate: window `window` had had its starts, and
    this request was refused `position`-th (0-based) in it."""

    limit: str
    by: Literal["concurrency", "rate"]
    free_at: float | None = None
    window: int | None = None
    position: int = 0
