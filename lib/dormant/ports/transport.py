"""Delivering wake-ups: now, or at an absolute time."""

from __future__ import annotations

from typing import Protocol

from dormant.core.records import ActorRef, Creation, InboxMessage


class Transport(Protocol):
    """Delivers wake-ups: now, or at an absolute time (timers, retries, scheduled actions)."""

    async def wake(self, ref: ActorRef, *, at: float | None = None, reason: str | None = None,
                   message: InboxMessage | None = None, creation: Creation | None = None) -> None:
        """Wake `ref` now or at `at`. `reason` names what the wake-up is about (e.g. a message id):
        wake-ups with the same reason may be collapsed into one by the transport.

        A request that stores something and wakes the actor sends the wake-up first, carrying what it
        stores (`message`, and `creation` when the actor may not exist yet): whoever runs the wake-up stores
        what is missing, so a request cut off after this call still completes (docs/semantics.md)."""
        ...
