"""The actor listing on DynamoDB: one status item per actor, in the sparse global index `status`.

The item (`sk = "s#"` in the actor's partition) says the actor's listed status (dormant.ports.listed_status),
since when and from which version. Its index keys are `lt` = the actor type and `ls` = the listing key
`<status>#<actor id>`, so one Query lists a type, or a type in one status (`begins_with`), in pages. It is
written only by a commit that changes the listed status (docs/storage.md: what that costs), as a conditional
PutItem that an older version or an older incarnation of the actor never wins.

Counting per status (`count`) reads the same index with `Select=COUNT` Queries: one per 1 MB of status items
(about 5,000), each costing the read units of the items it counts, and none once the limit is reached.

Attention marks (`AttentionItems`, dormant.ports.AttentionMark) are one more item per marked actor (`sk = "a#"`) in
the same index under `lt = "/attention"` (no actor type contains `/`) with `ls` = the actor id: one Query lists a
type's marks (`begins_with` its encoded name). They are written and removed only when a retry starts or ends or a
wake-up fails, never by an ordinary commit.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from dormant.core.cursors import check_attention_cursor, check_cursor, listing_key
from dormant.dynamodb.batches import ConditionFailed
from dormant.dynamodb.table import STATUS_INDEX
from dormant.ports import ActorCount, ActorPage, ActorRef, ActorSummary, AttentionMark, AttentionPage, AttentionReason
from dormant.workflow.history import WorkflowState

STATUS_SK = "s#"
ATTENTION_SK = "a#"
ATTENTION_TYPE = "/attention"  # the marks' index partition: never an actor type (names cannot contain "/")
MAX_COUNT_PAGES = 20  # Select=COUNT pages per count (1 MB each): the limit is reached long before
PutIf = Callable[[dict[str, Any], str, dict[str, Any]], Awaitable[bool]]
Call = Callable[..., Awaitable[Any]]


class StatusItems:
    """Reads and writes the status items of one table."""

    def __init__(self, call: Call, put_if: PutIf, table: str) -> None:
        self._call = call
        self._put_if = put_if
        self._table = table

    async def put(self, ref: ActorRef, *, status: str, since: float, version: int, created_at: float,
                  incarnation: str) -> bool:
        """Write the status of `version`; False when a later version (or incarnation) is there already."""
        item = {"pk": {"S": ref.id}, "sk": {"S": STATUS_SK}, "lt": {"S": ref.name},
                "ls": {"S": listing_key(WorkflowState(status), ref)}, "st": {"S": status},
                "at": {"N": repr(since)}, "v": {"N": str(version)}, "cr": {"N": repr(created_at)},
                "c": {"S": incarnation}, "k": {"S": json.dumps(list(ref.key), ensure_ascii=False)}}
        return await self._put_if(item, "attribute_not_exists(pk) OR c < :c OR (c = :c AND v < :v)",
                                  {":c": {"S": incarnation}, ":v": {"N": str(version)}})

    async def read(self, ref: ActorRef) -> ActorSummary | None:
        response = await self._call("GetItem", TableName=self._table, ConsistentRead=True,
                                    Key={"pk": {"S": ref.id}, "sk": {"S": STATUS_SK}})
        item = response.get("Item")
        return _summary(item) if item is not None else None

    async def list(self, actor_type: str, status: WorkflowState | None, limit: int,
                   after: str | None) -> ActorPage:
        values: dict[str, Any] = {":t": {"S": actor_type}}
        condition = "lt = :t"
        if status is not None:
            condition += " AND begins_with(ls, :s)"
            values[":s"] = {"S": f"{status.value}#"}
        kwargs: dict[str, Any] = {"TableName": self._table, "IndexName": STATUS_INDEX,
                                  "KeyConditionExpression": condition, "ExpressionAttributeValues": values,
                                  "Limit": max(1, limit)}
        if after is not None:
            actor_id = check_cursor(actor_type, status, after).partition("#")[2]
            kwargs["ExclusiveStartKey"] = {"lt": {"S": actor_type}, "ls": {"S": after}, "pk": {"S": actor_id},
                                           "sk": {"S": STATUS_SK}}
        response = await self._call("Query", **kwargs)
        last = response.get("LastEvaluatedKey")
        return ActorPage(actors=[_summary(item) for item in response.get("Items", [])],
                         cursor=last["ls"]["S"] if last else None)


    async def count(self, actor_type: str, status: WorkflowState, limit: int) -> ActorCount:
        """Count up to `limit` (one item more, to tell an exact count from a cut one)."""
        counted, start = 0, None
        for _ in range(MAX_COUNT_PAGES):
            kwargs: dict[str, Any] = {
                "TableName": self._table, "IndexName": STATUS_INDEX, "Select": "COUNT",
                "KeyConditionExpression": "lt = :t AND begins_with(ls, :s)",
                "ExpressionAttributeValues": {":t": {"S": actor_type}, ":s": {"S": f"{status.value}#"}},
                "Limit": limit + 1 - counted}
            if start is not None:
                kwargs["ExclusiveStartKey"] = start
            response = await self._call("Query", **kwargs)
            counted += int(response.get("Count", 0))
            start = response.get("LastEvaluatedKey")
            if counted > limit:
                return ActorCount(count=limit, exact=False)
            if start is None:
                return ActorCount(count=counted, exact=True)
        return ActorCount(count=counted, exact=False)


class AttentionItems:
    """Reads and writes the attention marks of one table (see the module docstring)."""

    def __init__(self, call: Call, table: str) -> None:
        self._call = call
        self._table = table

    async def mark(self, ref: ActorRef, reason: AttentionReason, since: float) -> None:
        await self._call("PutItem", TableName=self._table, Item={
            "pk": {"S": ref.id}, "sk": {"S": ATTENTION_SK}, "lt": {"S": ATTENTION_TYPE}, "ls": {"S": ref.id},
            "n": {"S": ref.name}, "k": {"S": json.dumps(list(ref.key), ensure_ascii=False)}, "why": {"S": reason},
            "at": {"N": repr(since)}})

    async def clear(self, ref: ActorRef, since: float | None) -> None:
        kwargs: dict[str, Any] = {"TableName": self._table, "Key": {"pk": {"S": ref.id}, "sk": {"S": ATTENTION_SK}}}
        if since is not None:
            kwargs.update(ConditionExpression="attribute_not_exists(pk) OR #at = :at",
                          ExpressionAttributeNames={"#at": "at"}, ExpressionAttributeValues={":at": {"N": repr(since)}})
        with contextlib.suppress(ConditionFailed):  # marked again meanwhile: the newer mark stays
            await self._call("DeleteItem", **kwargs)

    async def list(self, actor_type: str, limit: int, after: str | None) -> AttentionPage:
        kwargs: dict[str, Any] = {
            "TableName": self._table, "IndexName": STATUS_INDEX,
            "KeyConditionExpression": "lt = :t AND begins_with(ls, :p)",
            "ExpressionAttributeValues": {":t": {"S": ATTENTION_TYPE}, ":p": {"S": quote(actor_type, safe="") + "/"}},
            "Limit": max(1, limit)}
        if after is not None:
            actor_id = check_attention_cursor(actor_type, after)
            kwargs["ExclusiveStartKey"] = {"lt": {"S": ATTENTION_TYPE}, "ls": {"S": actor_id}, "pk": {"S": actor_id},
                                           "sk": {"S": ATTENTION_SK}}
        response = await self._call("Query", **kwargs)
        last = response.get("LastEvaluatedKey")
        marks = [AttentionMark(name=item["n"]["S"], key=tuple(json.loads(item["k"]["S"])),
                               reason=item["why"]["S"], since=float(item["at"]["N"]))
                 for item in response.get("Items", [])]
        return AttentionPage(marks=marks, cursor=last["ls"]["S"] if last else None)


def _summary(item: dict[str, Any]) -> ActorSummary:
    return ActorSummary(name=item["lt"]["S"], key=tuple(json.loads(item["k"]["S"])),
                        status=WorkflowState(item["st"]["S"]), since=float(item["at"]["N"]),
                        version=int(item["v"]["N"]), created_at=float(item["cr"]["N"]))
