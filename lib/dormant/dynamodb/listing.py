"""The actor listing on DynamoDB: one status item per actor, in the sparse global index `status`.

The item (`sk = "s#"` in the actor's partition) says the actor's listed status (dormant.core.records.listed_after),
since when and from which version. Its index keys are `lt` = the actor type and `ls` = the listing key
`<status>#<actor id>`, so one Query lists a type, or a type in one status (`begins_with`), in pages. It is
written only by a commit that changes the listed status (docs/storage.md: what that costs), as a conditional
PutItem that an older version or an older incarnation of the actor never wins.

Counting per status (`count`) reads the same index with `Select=COUNT` Queries: one per 1 MB of status items
(about 5,000), each costing the read units of the items it counts, and none once the limit is reached.

Attention marks (`AttentionItems`, dormant.core.records.AttentionMark) are one more item per marked actor
(`sk = "a#"`) in the same index under `lt = "/attention"` (no actor type contains `/`) with `ls` = the actor id: one
Query lists a type's marks (`begins_with` its encoded name). They are written and removed only when a retry starts
or ends or a wake-up fails, never by an ordinary commit.
"""

from __future__ import annotations

import json
from typing import Any

from dormant.core.cursors import check_attention_cursor, check_cursor, listing_key, status_prefix, type_prefix
from dormant.core.records import (
    ActorCount,
    ActorPage,
    ActorRef,
    ActorSummary,
    AttentionMark,
    AttentionPage,
    AttentionReason,
)
from dormant.dynamodb.keys import ATTENTION_SK, ATTENTION_TYPE, STATUS_INDEX, STATUS_SK, item_key
from dormant.dynamodb.requests import Item, Table
from dormant.workflow.history import WorkflowState

MAX_COUNT_PAGES = 20  # Select=COUNT pages per count (1 MB each): the limit is reached long before
_NEWER = "attribute_not_exists(pk) OR c < :c OR (c = :c AND v < :v)"  # an older version or incarnation never wins


class StatusItems:
    """Reads and writes the status items of one table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    async def put(self, ref: ActorRef, *, status: str, since: float, version: int, created_at: float,
                  incarnation: str) -> bool:
        """Write the status of `version`; False when a later version (or incarnation) is there already."""
        item = {**item_key(ref.id, STATUS_SK), "lt": {"S": ref.name},
                "ls": {"S": listing_key(WorkflowState(status), ref)}, "st": {"S": status},
                "at": {"N": repr(since)}, "v": {"N": str(version)}, "cr": {"N": repr(created_at)},
                "c": {"S": incarnation}, "k": {"S": json.dumps(list(ref.key), ensure_ascii=False)}}
        return await self.table.put(item, _NEWER, {":c": {"S": incarnation}, ":v": {"N": str(version)}})

    async def read(self, ref: ActorRef) -> ActorSummary | None:
        item = await self.table.get(item_key(ref.id, STATUS_SK))
        return _summary(item) if item is not None else None

    async def list(self, actor_type: str, status: WorkflowState | None, limit: int,
                   after: str | None) -> ActorPage:
        values: dict[str, Any] = {":t": {"S": actor_type}}
        condition = "lt = :t"
        if status is not None:
            condition += " AND begins_with(ls, :s)"
            values[":s"] = {"S": status_prefix(status)}
        start = None
        if after is not None:
            actor_id = check_cursor(actor_type, status, after).partition("#")[2]
            start = {"lt": {"S": actor_type}, "ls": {"S": after}, **item_key(actor_id, STATUS_SK)}
        page = await self.table.query_page(condition, values, index=STATUS_INDEX, consistent=False,
                                           limit=max(1, limit), start=start)
        return ActorPage(actors=[_summary(item) for item in page.items],
                         cursor=page.last_key["ls"]["S"] if page.last_key else None)

    async def count(self, actor_type: str, status: WorkflowState, limit: int) -> ActorCount:
        """Count up to `limit` (one item more, to tell an exact count from a cut one)."""
        counted, start = 0, None
        for _ in range(MAX_COUNT_PAGES):
            page = await self.table.query_page(
                "lt = :t AND begins_with(ls, :s)", {":t": {"S": actor_type}, ":s": {"S": status_prefix(status)}},
                index=STATUS_INDEX, consistent=False, count_only=True, limit=limit + 1 - counted, start=start)
            counted += page.count
            start = page.last_key
            if counted > limit:
                return ActorCount(count=limit, exact=False)
            if start is None:
                return ActorCount(count=counted, exact=True)
        return ActorCount(count=counted, exact=False)


class AttentionItems:
    """Reads and writes the attention marks of one table (see the module docstring)."""

    def __init__(self, table: Table) -> None:
        self.table = table

    async def mark(self, ref: ActorRef, reason: AttentionReason, since: float) -> None:
        await self.table.put({**item_key(ref.id, ATTENTION_SK), "lt": {"S": ATTENTION_TYPE}, "ls": {"S": ref.id},
                              "n": {"S": ref.name}, "k": {"S": json.dumps(list(ref.key), ensure_ascii=False)},
                              "why": {"S": reason}, "at": {"N": repr(since)}})

    async def clear(self, ref: ActorRef, since: float | None) -> None:
        key = item_key(ref.id, ATTENTION_SK)
        if since is None:
            await self.table.delete(key)
        else:  # False: marked again meanwhile, and the newer mark stays
            await self.table.delete(key, "attribute_not_exists(pk) OR #at = :at", {":at": {"N": repr(since)}},
                                    {"#at": "at"})

    async def list(self, actor_type: str, limit: int, after: str | None) -> AttentionPage:
        start = None
        if after is not None:
            actor_id = check_attention_cursor(actor_type, after)
            start = {"lt": {"S": ATTENTION_TYPE}, "ls": {"S": actor_id}, **item_key(actor_id, ATTENTION_SK)}
        page = await self.table.query_page(
            "lt = :t AND begins_with(ls, :p)",
            {":t": {"S": ATTENTION_TYPE}, ":p": {"S": type_prefix(actor_type)}},
            index=STATUS_INDEX, consistent=False, limit=max(1, limit), start=start)
        marks = [AttentionMark(name=item["n"]["S"], key=tuple(json.loads(item["k"]["S"])),
                               reason=item["why"]["S"], since=float(item["at"]["N"])) for item in page.items]
        return AttentionPage(marks=marks, cursor=page.last_key["ls"]["S"] if page.last_key else None)


def _summary(item: Item) -> ActorSummary:
    return ActorSummary(name=item["lt"]["S"], key=tuple(json.loads(item["k"]["S"])),
                        status=WorkflowState(item["st"]["S"]), since=float(item["at"]["N"]),
                        version=int(item["v"]["N"]), created_at=float(item["cr"]["N"]))
