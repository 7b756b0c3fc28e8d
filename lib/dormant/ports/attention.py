"""Attention marks: actors that may need an operator although their listed status is a live one."""

from __future__ import annotations

from typing import Protocol

from dormant.core.records import ActorRef, AttentionPage, AttentionReason


class Attention(Protocol):
    async def mark_attention(self, ref: ActorRef, reason: AttentionReason, since: float) -> None:
        """Mark the actor as one that may need an operator (replaces an earlier mark of it)."""
        ...

    async def clear_attention(self, ref: ActorRef, since: float | None = None) -> None:
        """Remove the actor's mark; with `since`, only the mark made at that time (a newer one stays)."""
        ...

    async def list_attention(self, actor_type: str, *, limit: int = 100, after: str | None = None) -> AttentionPage:
        """The marked actors of a type, by storage id, `limit` at most per page; `after` is the previous page's
        cursor. Like the listing, it may lag a write briefly (DynamoDB's index)."""
        ...
