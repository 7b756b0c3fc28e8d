"""Flow control (dormant.core.flow, docs/semantics.md "Limits"): single-item conditional writes in one partition per
limit, never in an actor's. Leases are on the runtime's clock (`now`), which the caller passes."""

from __future__ import annotations

from typing import Protocol

from dormant.core.records import ActorRef
from dormant.core.slots import SlotLease, SlotRefusal, SlotRequest


class Slots(Protocol):
    async def acquire_slot(self, request: SlotRequest) -> SlotLease | SlotRefusal:
        """A slot of the limit (if it has a concurrency) and a start in the current window (if it has a rate), or
        a refusal saying why. A holder that holds a slot already (a re-run after a crash) gets that slot again."""
        ...

    async def renew_slot(self, lease: SlotLease, until: float) -> bool:
        """Move the slot's expiry to `until`; False when the holder no longer holds it (its lease ran out)."""
        ...

    async def release_slot(self, lease: SlotLease, now: float) -> list[ActorRef]:
        """Free the slot (if the holder still holds it) and take the oldest waiter out of the line: the actors to
        wake (at most one)."""
        ...
