"""What a step asking for its flow-control limit and a store say to each other (EventStore.acquire_slot and
friends; dormant.core.flow declares the limits, dormant.memory.slots and dormant.dynamodb.slots enforce them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dormant.core.records import ActorRef


@dataclass(frozen=True)
class LimitRule:
    """A declared limit (dormant.core.flow.Limit) as a store enforces it."""

    name: str
    concurrency: int | None  # steps at once; None: no concurrency limit
    window: float  # seconds of one rate window, aligned on the clock (epoch multiples)
    per_window: int | None  # starts per window; None: no rate limit


@dataclass(frozen=True)
class SlotRequest:
    """A step asking for its limit, right before its body runs. Times are on the runtime's clock."""

    rule: LimitRule
    ref: ActorRef  # whose step: woken when a slot frees while it waits
    holder: str  # the step: its actor's id and location (a re-run after a crash is the same holder)
    now: float
    lease_until: float  # the slot's expiry if granted
    queued_since: float  # when the step began waiting for the limit (`now` if it has not): its place in line
    queued: bool  # it waited before: its waiter item goes once it has the slot


@dataclass(frozen=True)
class SlotLease:
    """A granted request: the slot held (None for a limit without concurrency: nothing to release)."""

    limit: str
    holder: str
    actor: str  # the holder's actor id (shown to operators)
    slot: int | None
    expires: float


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
