"""The actor listing on DynamoDB: one status item per actor, in the sparse global index `status`.

The item (`sk = "s#"` in the actor's partition) says the actor's listed status (dormant.ports.listed_status),
since when and from which version. Its index keys are `lt` = the actor type and `ls` = the listing key
`<status>#<actor id>`, so one Query lists a type, or a type in one status (`begins_with`), in pages. It is
written only by a commit that changes the listed status (docs/storage.md: what that costs), as a conditional
PutItem that an older version or an older incarnation of the actor never wins.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from dormant.aws.table import STATUS_INDEX
from dormant.ports import ActorPage, ActorRef, ActorSummary, check_cursor, listing_key
from dormant.workflow.history import WorkflowState

STATUS_SK = "s#"
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


def _summary(item: dict[str, Any]) -> ActorSummary:
    return ActorSummary(name=item["lt"]["S"], key=tuple(json.loads(item["k"]["S"])),
                        status=WorkflowState(item["st"]["S"]), since=float(item["at"]["N"]),
                        version=int(item["v"]["N"]), created_at=float(item["cr"]["N"]))
