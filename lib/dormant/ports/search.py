"""Actors found by their search attributes (planned and matched by dormant.core.searchplan)."""

from __future__ import annotations

from typing import Protocol

from dormant.core.records import ActorPage, MatchCount
from dormant.core.searchplan import SearchPlan
from dormant.workflow.history import WorkflowState


class Search(Protocol):
    async def search_actors(self, plan: SearchPlan, *, status: WorkflowState | None = None, limit: int = 100,
                            after: str | None = None) -> ActorPage:
        """The actors of `plan.actor_type` whose search attributes satisfy every condition of `plan` (and of the
        listed `status`), ordered by the value of the attribute the plan reads, at most `limit` per page; `after` is
        the previous page's cursor. Each summary carries the actor's `attributes`. DynamoDB: Queries of the `search`
        index, never a Scan (docs/storage.md); like the listing, it may lag a commit briefly."""
        ...

    async def count_matches(self, plan: SearchPlan, *, limit: int) -> MatchCount:
        """How many actors match `plan`, per listed status, counting at most `limit` in all."""
        ...
