"""Callback lookup items of the DynamoDB store (dormant.workflow.callbacks, dormant.runtime.callbacks).

Each callback has one item in a partition of its own, `pk = "callback#<SHA-256 of the token>"`, `sk = "callback"`:
the key holds the token's hash, never the token, so reading the table's keys (or a log, a metric, an error that
names one) gives nothing that completes a callback. Actor ids never contain `#` (ActorRef.id percent-encodes
it), so these partitions never meet an actor's. No index holds them: finding one is a GetItem, never a Scan.

| attribute | what |
|---|---|
| `d` | the CallbackRecord as JSON (actor name and key, the actor's creation time, name, location, deadlines) |
| `st` | its state: `open`, then `completed`, `failed`, `timed_out` or `cancelled` |
| `hbd` | the heartbeat deadline (epoch seconds), moved by each heartbeat (an UpdateItem of this attribute only) |
| `v` | the actor version whose commit wrote the state |
| `expires_at` | TTL: open, a day past its deadline (none without a deadline); closed, a day after it closed |

A commit's `draft.callbacks` travel in its commit item (the side payload, `k`): the item writes follow the commit
item (`write`, called by the store's settling), and a load of a version whose settling was cut off writes them
again. The writes are conditional, so a re-write never undoes anything: an open item only where none is, a closed
one only over an open one (or none): a heartbeat's `hbd` is never overwritten by an older commit.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from dormant.core.callbacks import CallbackRecord, callback_record
from dormant.dynamodb.batches import ConditionFailed
from dormant.dynamodb.items import Head
from dormant.dynamodb.table import TTL_ATTRIBUTE
from dormant.ports import ActorRef
from dormant.settings import Settings

if TYPE_CHECKING:
    from dormant.dynamodb.store import DynamoEventStore

PARTITION_PREFIX = "callback#"
SORT_KEY = "callback"
Call = Callable[..., Awaitable[Any]]

class CallbackItems:
    """Reads and writes of the callback lookup items."""

    def __init__(self, call: Call, table: str, settings: Settings) -> None:
        self._call = call
        self._table = table
        self._retention = float(settings.response_ttl_seconds)

    @staticmethod
    def key(token_hash: str) -> dict[str, dict[str, str]]:
        return {"pk": {"S": PARTITION_PREFIX + token_hash}, "sk": {"S": SORT_KEY}}

    async def write(self, ref: ActorRef, head: Head) -> None:
        """The lookup items of the callbacks `head`'s commit opened or closed (idempotent: see the module)."""
        for change in head.side.callbacks:
            record = callback_record(ref, float(head.meta["created_at"]), head.version, change, self._retention)
            item: dict[str, dict[str, Any]] = {
                **self.key(record.token_hash), "d": {"S": record.model_dump_json()}, "st": {"S": record.state},
                "v": {"N": str(record.version)}}
            if record.heartbeat_deadline is not None:
                item["hbd"] = {"N": repr(record.heartbeat_deadline)}
            if record.expires_at is not None:
                item[TTL_ATTRIBUTE] = {"N": str(int(record.expires_at) + 1)}
            condition = "attribute_not_exists(pk)" if record.state == "open" else \
                "attribute_not_exists(pk) OR #st = :open"
            kwargs: dict[str, Any] = {"TableName": self._table, "Item": item, "ConditionExpression": condition}
            if record.state != "open":
                kwargs.update(ExpressionAttributeNames={"#st": "st"},
                              ExpressionAttributeValues={":open": {"S": "open"}})
            with contextlib.suppress(ConditionFailed):  # written before (a re-settled commit), or closed already
                await self._call("PutItem", **kwargs)

    async def read(self, token_hash: str) -> CallbackRecord | None:
        response = await self._call("GetItem", TableName=self._table, Key=self.key(token_hash), ConsistentRead=True)
        item = response.get("Item")
        if item is None:
            return None
        record = CallbackRecord.model_validate(json.loads(item["d"]["S"]))
        if "hbd" in item:  # heartbeats move this attribute only
            record.heartbeat_deadline = float(item["hbd"]["N"])
        return record

    async def heartbeat(self, token_hash: str, heartbeat_deadline: float, now: float) -> bool:
        """One conditional UpdateItem: `hbd` moves forward while the callback is open and `hbd` is still ahead."""
        try:
            await self._call(
                "UpdateItem", TableName=self._table, Key=self.key(token_hash), UpdateExpression="SET hbd = :new",
                ConditionExpression="#st = :open AND hbd > :now AND hbd < :new",
                ExpressionAttributeNames={"#st": "st"},
                ExpressionAttributeValues={":open": {"S": "open"}, ":now": {"N": repr(now)},
                                           ":new": {"N": repr(heartbeat_deadline)}})
        except ConditionFailed:
            # Not moved: gone, closed or missed (False), or another heartbeat moved it as far already (True).
            record = await self.read(token_hash)
            return (record is not None and record.state == "open" and record.heartbeat_deadline is not None
                    and now < record.heartbeat_deadline and record.heartbeat_deadline >= heartbeat_deadline)
        return True


# EventStore's callback reads and writes, as DynamoEventStore's methods (`store.read_callback(...)`).
async def read_callback(store: DynamoEventStore, token_hash: str) -> CallbackRecord | None:
    return await store.callback_items.read(token_hash)


async def heartbeat_callback(store: DynamoEventStore, token_hash: str, heartbeat_deadline: float, now: float) -> bool:
    return await store.callback_items.heartbeat(token_hash, heartbeat_deadline, now)
