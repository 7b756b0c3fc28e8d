"""Finding actors by their search attributes (docs/operations.md, "Search attributes"): the `where` conditions are
read against the actor type's declaration (dormant.core.search), planned (dormant.core.searchplan: which one the
index reads, which ones filter) and run by the store. The operator routes, the clients and the CLI all come through
here."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Protocol

from dormant.core.cursors import every_summary
from dormant.core.search import parse_conditions
from dormant.core.searchplan import SearchPlan, plan_search
from dormant.models import ActorCounts, StatusCount
from dormant.ports import LISTED_STATUSES, ActorPage, ActorSummary, EventStore
from dormant.workflow.history import WorkflowState

if TYPE_CHECKING:
    from dormant.actor import Registry


class SearchHost(Protocol):
    """What a search needs: the registry (the declarations) and the store (an ActorService has both)."""

    registry: Registry
    store: EventStore


def plan(host: SearchHost, actor_type: str, where: Sequence[str]) -> SearchPlan:
    """The plan of a search; UnknownActorError for a type this code does not serve, InvalidSearchConditionError for
    conditions its declaration cannot read."""
    definition = host.registry.get(actor_type)
    return plan_search(actor_type, parse_conditions(actor_type, definition.search, where))


async def search_actors(host: SearchHost, actor_type: str, where: Sequence[str], *,
                        status: WorkflowState | None = None, limit: int = 100, cursor: str | None = None) -> ActorPage:
    """One page of the actors of a type whose attributes satisfy every condition (and of the listed status), ordered by
    the value of the attribute the index reads; each with its `attributes`."""
    return await host.store.search_actors(plan(host, actor_type, where), status=status, limit=limit, after=cursor)


async def every_match(host: SearchHost, actor_type: str, where: Sequence[str], *,
                      status: WorkflowState | None = None, page_size: int = 100) -> AsyncIterator[ActorSummary]:
    searched = plan(host, actor_type, where)  # refused conditions raise before the first page
    async for summary in every_summary(
            lambda cursor: host.store.search_actors(searched, status=status, limit=page_size, after=cursor)):
        yield summary


async def match_counts(host: SearchHost, actor_type: str, where: Sequence[str], *, limit: int = 1000) -> ActorCounts:
    """How many actors of the type match, per listed status: the first `limit` matches are counted (in the index's
    order), and every count is `exact` only if there are no more."""
    found = await host.store.count_matches(plan(host, actor_type, where), limit=limit)
    return ActorCounts(actor=actor_type, counts={
        status.value: StatusCount(count=found.counts.get(status.value, 0), exact=found.exact)
        for status in LISTED_STATUSES})
