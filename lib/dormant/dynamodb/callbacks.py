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
again. The writes are conditional, so a re-write never undoes anything: the condition is dormant.core.callbacks's
rule (`replaceable`: an open item only where none is, a closed one only over an open one, or none), so a heartbeat's
`hbd` is never overwritten by an older commit; a heartbeat moves `hbd` when `heartbeat_allowed`.
"""

from __future__ import annotations

import json
from typing import Any

from dormant.core.callbacks import CallbackRecord, callback_record, heartbeat_allowed, replaceable
from dormant.core.records import ActorRef
from dormant.dynamodb.items import Head
from dormant.dynamodb.keys import callback_key
from dormant.dynamodb.requests import Item, Table
from dormant.dynamodb.table import TTL_ATTRIBUTE
from dormant.settings import Settings
from dormant.workflow.history import CallbackState


def write_condition(state: CallbackState) -> tuple[str, dict[str, Any]]:
    """The condition (and its values) of a put of a record in `state`: dormant.core.callbacks.may_replace, in
    DynamoDB's words."""
    states = replaceable(state)
    if not states:
        return "attribute_not_exists(pk)", {}
    names = [f":s{index}" for index in range(len(states))]
    return ("attribute_not_exists(pk) OR " + " OR ".join(f"#st = {name}" for name in names),
            {name: {"S": known} for name, known in zip(names, states, strict=True)})


class CallbackItems:
    """Reads and writes of the callback lookup items."""

    def __init__(self, table: Table, settings: Settings) -> None:
        self.table = table
        self._retention = float(settings.response_ttl_seconds)

    async def write(self, ref: ActorRef, head: Head) -> None:
        """The lookup items of the callbacks `head`'s commit opened or closed (idempotent: see the module)."""
        for change in head.side.callbacks:
            record = callback_record(ref, float(head.meta["created_at"]), head.version, change, self._retention)
            item: Item = {**callback_key(record.token_hash), "d": {"S": record.model_dump_json()},
                          "st": {"S": record.state}, "v": {"N": str(record.version)}}
            if record.heartbeat_deadline is not None:
                item["hbd"] = {"N": repr(record.heartbeat_deadline)}
            if record.expires_at is not None:
                item[TTL_ATTRIBUTE] = {"N": str(int(record.expires_at) + 1)}
            condition, values = write_condition(record.state)
            # False: written before (a re-settled commit), or closed already
            await self.table.put(item, condition, values, {"#st": "st"} if values else None)

    async def read(self, token_hash: str) -> CallbackRecord | None:
        item = await self.table.get(callback_key(token_hash))
        if item is None:
            return None
        record = CallbackRecord.model_validate(json.loads(item["d"]["S"]))
        if "hbd" in item:  # heartbeats move this attribute only
            record.heartbeat_deadline = float(item["hbd"]["N"])
        return record

    async def heartbeat(self, token_hash: str, heartbeat_deadline: float, now: float) -> bool:
        """One conditional UpdateItem: `hbd` moves forward while `heartbeat_allowed` (open, `hbd` still ahead)."""
        if await self.table.update(callback_key(token_hash), "SET hbd = :new",
                                   "#st = :open AND hbd > :now AND hbd < :new",
                                   {":open": {"S": "open"}, ":now": {"N": repr(now)},
                                    ":new": {"N": repr(heartbeat_deadline)}}, {"#st": "st"}):
            return True
        # Not moved: gone, closed or missed (False), or another heartbeat moved it as far already (True).
        record = await self.read(token_hash)
        return (record is not None and heartbeat_allowed(record.state, record.heartbeat_deadline, now)
                and record.heartbeat_deadline is not None and record.heartbeat_deadline >= heartbeat_deadline)
