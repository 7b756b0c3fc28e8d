"""Flow-control slots in memory (MemoryEventStore's `acquire_slot`, `renew_slot`, `release_slot`): the reference
semantics the DynamoDB store's (dormant.dynamodb.slots) follow, each call atomic, leases on the runtime's clock
(TestEnv's virtual clock: moving it past a lease frees the slot, as a killed worker's frees itself). A keyed limit
keeps each key's slots, windows and line apart; a line is in rank order (dormant.core.slots.line_rank).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from dormant.core.slots import SlotLease, SlotRefusal, SlotRequest
from dormant.ports import ActorRef

Enter = Callable[[str], Literal["before", "after"] | None]
Leave = Callable[[Literal["before", "after"] | None, str], None]

WAITER_TTL = 900.0
"""Seconds a waiter stays in a limit's line past the first lease end it was told (when it asks again at the latest):
only a waiter that went away, e.g. a deleted actor, runs out, and a release then skips and drops it."""


@dataclass(slots=True)
class _Slot:
    holder: str
    actor: str
    expires: float


@dataclass(slots=True)
class _Waiter:
    ref: ActorRef
    until: float


@dataclass
class _LimitState:
    slots: dict[int, _Slot] = field(default_factory=dict)
    tickets: dict[int, int] = field(default_factory=dict)  # rate window -> starts asked for in it (granted or not)
    waiters: dict[tuple[float, str], _Waiter] = field(default_factory=dict)  # (rank, holder): first served first


class MemorySlots:
    """The limits' items of one memory store; each call counts as a store call and takes its injected faults
    (`enter`, `leave`: MemoryEventStore's)."""

    def __init__(self, enter: Enter, leave: Leave) -> None:
        self._limits: dict[tuple[str, str | None], _LimitState] = {}  # (limit, key): a keyed limit's keys apart
        self._enter = enter
        self._leave = leave

    async def acquire(self, request: SlotRequest) -> SlotLease | SlotRefusal:
        return self.acquire_now(request)

    async def renew(self, lease: SlotLease, until: float) -> bool:
        when = self._enter("renew_slot")
        state = self._limits.get((lease.limit, lease.key))
        held = state.slots.get(lease.slot) if state is not None and lease.slot is not None else None
        renewed = held is not None and held.holder == lease.holder
        if held is not None and renewed:
            held.expires = until
        self._leave(when, "renew_slot")
        return renewed

    async def release(self, lease: SlotLease, now: float) -> list[ActorRef]:
        return self.release_now(lease, now)

    def acquire_now(self, request: SlotRequest) -> SlotLease | SlotRefusal:
        """`acquire`, answered at once (dormant.runtime.slots asks so: no coroutine per limited step)."""
        when = self._enter("acquire_slot")
        try:
            rule, now, holder = request.rule, request.now, request.holder
            state = self._limits.get((rule.name, rule.key))
            if state is None:
                state = self._limits[rule.name, rule.key] = _LimitState()
            slot: int | None = None
            if rule.concurrency is not None:
                mine = [index for index, held in state.slots.items() if held.holder == holder] if state.slots else None
                if mine:  # a re-run of the same step (its wake-up crashed): the same slot, never a second one
                    slot = mine[0]
                elif not state.slots:  # all free (the common case): the first, without a search
                    slot = 0
                else:
                    slot = next((index for index in range(rule.concurrency)
                                 if index not in state.slots or state.slots[index].expires <= now), None)
                    if slot is None:
                        free_at = min(held.expires for held in state.slots.values())
                        state.waiters[(request.rank, holder)] = _Waiter(request.ref, free_at + WAITER_TTL)
                        return SlotRefusal(limit=rule.name, by="concurrency", free_at=free_at)
                state.slots[slot] = _Slot(holder, actor := request.ref.id, request.lease_until)
            if rule.per_window is not None:
                window = math.floor(now / rule.window)
                ticket = state.tickets.get(window, 0)
                state.tickets[window] = ticket + 1
                for old in [w for w in state.tickets if w < window - 1]:
                    del state.tickets[old]  # (DynamoDB's expire by their time to live)
                if ticket >= rule.per_window:
                    if slot is not None:  # it does not start: the slot goes back
                        del state.slots[slot]
                    return SlotRefusal(limit=rule.name, by="rate", window=window, position=ticket - rule.per_window)
            if request.queued:
                state.waiters.pop((request.rank, holder), None)
            return SlotLease(rule.name, holder, request.ref.id if slot is None else actor, slot, request.lease_until,
                             rule.key)
        finally:
            if when is not None:  # a fault armed for this call: "after" raises once it is applied
                self._leave(when, "acquire_slot")

    def release_now(self, lease: SlotLease, now: float) -> list[ActorRef]:
        """`release`, answered at once."""
        when = self._enter("release_slot")
        try:
            state = self._limits.get((lease.limit, lease.key))
            if state is None or lease.slot is None:
                return []
            held = state.slots.get(lease.slot)
            if held is None or held.holder != lease.holder:
                return []  # its lease ran out and someone else has the slot: nothing freed
            del state.slots[lease.slot]
            if not state.waiters:
                return []
            for key in sorted(state.waiters):
                waiter = state.waiters.pop(key)
                if waiter.until > now:
                    return [waiter.ref]
            return []
        finally:
            if when is not None:
                self._leave(when, "release_slot")

    def held(self, limit: str, now: float, key: str | None = None) -> dict[int, str]:
        """Slots of `limit` (of its `key`, if keyed) held at `now`: index -> the holder's actor id (tests, tools)."""
        state = self._limits.get((limit, key))
        if state is None:
            return {}
        return {index: held.actor for index, held in state.slots.items() if held.expires > now}

    def waiting(self, limit: str, key: str | None = None) -> list[ActorRef]:
        """The actors in `limit`'s line (of its `key`, if keyed), first served first."""
        state = self._limits.get((limit, key))
        return [] if state is None else [state.waiters[key].ref for key in sorted(state.waiters)]
