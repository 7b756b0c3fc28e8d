"""Actors listed by type and status, and counted (paging cursors: dormant.core.cursors)."""

from __future__ import annotations

from typing import Protocol

from dormant.core.records import ActorCount, ActorPage, ActorRef, ActorSummary
from dormant.workflow.history import WorkflowState


class Listing(Protocol):
    async def read_summary(self, ref: ActorRef) -> ActorSummary | None:
        """The actor's listing entry (one cheap read; None if it does not exist). It follows each commit
        that changes the listed status (a crash between the two is repaired by the next load)."""
        ...

    async def list_actors(self, actor_type: str, *, status: WorkflowState | None = None, limit: int = 100,
                          after: str | None = None) -> ActorPage:
        """Actors of one type, optionally of one listed status, in listing order, `limit` at most per page;
        `after` is the previous page's cursor. Listings may lag a commit briefly (DynamoDB's index)."""
        ...

    async def count_actors(self, actor_type: str, status: WorkflowState, *, limit: int) -> ActorCount:
        """How many actors of a type are listed in `status`, counting at most `limit` (then `exact` is False).
        Cheap: DynamoDB counts with Select=COUNT Queries of the listing's index, one per 1 MB of status items."""
        ...
