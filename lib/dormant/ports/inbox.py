"""An actor's inbox: messages stored idempotently by id, before anyone waits for them (dormant.core.dedupe says how
long an id stays a duplicate)."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Protocol

from dormant.core.records import ActorRef, InboxMessage


class Inbox(Protocol):
    async def enqueue(self, ref: ActorRef, message: InboxMessage) -> bool:
        """Persist a message idempotently by id; False when the id is a duplicate: its message is pending, or was
        consumed less than the dedupe window ago (dormant.core.dedupe)."""
        ...

    async def message_fingerprint(self, ref: ActorRef, message_id: str) -> str | None:
        """The fingerprint of the stored message with this id (pending or consumed, within the dedupe
        window), None if unknown: how a reused idempotency key is compared with the first request."""
        ...

    async def wait_inbox(self, ref: ActorRef, known: AbstractSet[str], timeout: float) -> list[InboxMessage]:
        """Pending inbox messages of `ref` (in send order) whose ids are not in `known`, as soon as there is
        one, or [] after `timeout` seconds. A running wake-up's in-process queue wait uses it."""
        ...
