"""Search attributes on DynamoDB: one item per (actor, attribute) in the sparse global index `search`.

The item (`sk = "x#<attribute>"` in the actor's partition) has the index keys `xk` = `<actor type>#<attribute>#<type
code>` and `xv` = the value's sortable encoding, `!` and 16 hex digits of the actor id's hash
(dormant.core.searchplan), so one Query reads the actors whose value lies in a range, in value order. Each item also
carries a copy of all the actor's attributes (`a`, JSON) and its listed status (`st`, since `at`): the other
conditions of a search, and its status filter, are checked on that copy, and counts per status come from it, with no
read of the actor.

The items are derived, like the status item: a commit that changes the attributes or the listed status marks it in its
commit item (`sx` in the payload: the attributes it unset), and after the commit item every item of the actor is
written again (each carries the copy, so one change rewrites them all), concurrently, each a conditional PutItem that
an older version or incarnation never wins; an unset attribute's item becomes a tombstone (no index keys: out of the
index) so that a late writer of an older version cannot bring it back. A crash in between leaves them behind until the
actor's next load settles it (dormant.dynamodb.settle, which probes for them with the responses and events).
docs/storage.md, "Search attributes", has the costs.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

from dormant.core.records import ActorPage, ActorRef, ActorSummary, MatchCount
from dormant.core.search import plain
from dormant.core.searchplan import SearchPlan, index_key, index_partition
from dormant.dynamodb.items import Head, dumps
from dormant.dynamodb.keys import SEARCH_INDEX, attribute_of, item_key, search_key
from dormant.dynamodb.requests import Item, Page, Table
from dormant.workflow.history import WorkflowState

MAX_SEARCH_PAGES = 10  # Query pages one page of results may read (each at most 1 MB) before handing out a cursor
MAX_COUNT_PAGES = 20
FILTERED_PAGE = 200  # items a Query reads at a time when other conditions (or the status) filter them
_NEWER = "attribute_not_exists(pk) OR c < :c OR (c = :c AND v < :v)"


def sort_keys(head: Head) -> list[str]:
    """The search items the settling of `head` writes (none unless its commit changed the attributes or the listed
    status): every attribute it has, and the ones its commit unset."""
    side = head.side
    if side.unset is None and side.listed is None:
        return []
    return [search_key(name) for name in sorted({*head.search, *(side.unset or [])})]


class SearchItems:
    """Writes and queries the search items of one table (see the module docstring)."""

    def __init__(self, table: Table) -> None:
        self.table = table

    async def settle(self, ref: ActorRef, head: Head, found: set[str]) -> int:
        """Write `head`'s search items that `found` (the probe's) does not show written; returns how many it wrote."""
        keys = [key for key in sort_keys(head) if key not in found]
        if not keys:
            return 0
        status = head.listed
        shared = {"st": {"S": status}, "at": {"N": repr(head.since)},
                  "cr": {"N": repr(float(head.meta["created_at"]))}, "k": {"S": dumps(list(ref.key))},
                  "a": {"S": dumps(dict(sorted(head.search.items())))}, "v": {"N": str(head.version)},
                  "c": {"S": head.incarnation}}
        items = []
        for key in keys:
            name = attribute_of(key)
            item: Item = {**item_key(ref.id, key), "v": shared["v"], "c": shared["c"]}
            if name in head.search:  # else a tombstone: out of the index, and no older writer can put it back
                code, value = head.search[name]
                item.update(shared, xk={"S": index_partition(ref.name, name, code)},
                            xv={"S": index_key(code, value, ref.id)})
            items.append(item)
        values = {":c": {"S": head.incarnation}, ":v": {"N": str(head.version)}}
        await asyncio.gather(*(self.table.put(item, _NEWER, values) for item in items))  # False: a later one won
        return len(items)

    async def search(self, plan: SearchPlan, *, status: WorkflowState | None = None, limit: int = 100,
                     after: str | None = None) -> ActorPage:
        """EventStore.search_actors: Queries of one partition of the `search` index, never a Scan. Conditions other
        than the indexed attribute's (and the status) filter what a Query reads, so a page may take several Queries
        (at most MAX_SEARCH_PAGES: then it ends early, with a cursor)."""
        start = _start(plan, *plan.read_cursor(after)) if after is not None else None
        if plan.empty:
            return ActorPage(actors=[], cursor=None)
        limit = max(1, limit)
        filtered = status is not None or any(c.attribute != plan.attribute for c in plan.conditions)
        found: list[ActorSummary] = []
        for _ in range(MAX_SEARCH_PAGES):  # (after the loop `start` is a LastEvaluatedKey: the budget ran out)
            page = await self._query(plan, limit=FILTERED_PAGE if filtered else limit - len(found), start=start)
            start = page.last_key
            for index, item in enumerate(page.items):
                attributes = json.loads(item["a"]["S"])
                if (status is None or item["st"]["S"] == status.value) and plan.matches(attributes):
                    found.append(_summary(plan, item, attributes))
                    if len(found) == limit:
                        if start is None and index == len(page.items) - 1:
                            return ActorPage(actors=found, cursor=None)
                        return ActorPage(actors=found, cursor=plan.cursor(item["xv"]["S"], item["pk"]["S"]))
            if start is None:
                return ActorPage(actors=found, cursor=None)
        assert start is not None
        return ActorPage(actors=found, cursor=plan.cursor(start["xv"]["S"], start["pk"]["S"]))

    async def count(self, plan: SearchPlan, *, limit: int) -> MatchCount:
        """EventStore.count_matches: the first `limit` matches in index order, per status, read (status and the copy
        of the attributes only) from 1 MB Query pages of the `search` index; one match more tells an exact count."""
        counts: Counter[str] = Counter()
        if plan.empty:
            return MatchCount(counts={}, exact=True)
        start: Item | None = None
        for _ in range(MAX_COUNT_PAGES):
            page = await self._query(plan, start=start, projection="#st, #a", names={"#st": "st", "#a": "a"})
            for item in page.items:
                if plan.matches(json.loads(item["a"]["S"])):
                    if sum(counts.values()) == limit:
                        return MatchCount(counts=dict(counts), exact=False)
                    counts[item["st"]["S"]] += 1
            start = page.last_key
            if start is None:
                return MatchCount(counts=dict(counts), exact=True)
        return MatchCount(counts=dict(counts), exact=False)

    async def _query(self, plan: SearchPlan, **options: Any) -> Page:
        condition, values = "xk = :k", {":k": {"S": plan.partition}}
        if plan.low is not None and plan.high is not None:
            condition += " AND xv BETWEEN :lo AND :hi"
        elif plan.low is not None:
            condition += " AND xv >= :lo"
        elif plan.high is not None:
            condition += " AND xv <= :hi"
        values.update({":lo": {"S": plan.low}} if plan.low is not None else {})
        values.update({":hi": {"S": plan.high}} if plan.high is not None else {})
        return await self.table.query_page(condition, values, index=SEARCH_INDEX, consistent=False, **options)


def _start(plan: SearchPlan, key: str, actor_id: str) -> Item:
    return {"xk": {"S": plan.partition}, "xv": {"S": key}, **item_key(actor_id, search_key(plan.attribute))}


def _summary(plan: SearchPlan, item: Item, attributes: dict[str, Any]) -> ActorSummary:
    return ActorSummary(name=plan.actor_type, key=tuple(json.loads(item["k"]["S"])),
                        status=WorkflowState(item["st"]["S"]), since=float(item["at"]["N"]),
                        version=int(item["v"]["N"]), created_at=float(item["cr"]["N"]), attributes=plain(attributes))
