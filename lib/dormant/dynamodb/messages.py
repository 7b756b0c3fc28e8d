"""The inbox items of the DynamoDB store: `i#<message id>` per message, pending (in the sparse `pending`
index, in send order) until a commit consumes it, then a tombstone that keeps the id a duplicate until its
TTL ends the dedupe window (docs/storage.md, "Inbox"). A running wake-up's polling of them is in
dormant.dynamodb.inbox.

Both forms carry the message's fingerprint `h` (InboxMessage.fingerprint): a reused idempotency key is
compared with the first request even after that was consumed. Tombstones are written from fingerprints
this store saw on its loads (the pending items of consumed messages stay in the index until their
tombstone is written, so every load of the actor reads them); the few it has not seen are read first.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from dormant.core.limits import BATCH_GET
from dormant.dynamodb.items import Side, dumps, json_size
from dormant.dynamodb.table import TTL_ATTRIBUTE
from dormant.ports import ActorRef, InboxMessage

INBOX_PREFIX = "i#"
_FINGERPRINTS_KEPT = 50_000
_BATCH_GET_MAX = BATCH_GET.maximum

Call = Callable[..., Awaitable[Any]]
PutIf = Callable[[dict[str, Any], str, dict[str, Any]], Awaitable[bool]]
BatchWrite = Callable[[list[dict[str, Any]]], Awaitable[None]]


class InboxItems:
    """Writes and reads the inbox items of one table (the store passes its request helpers)."""

    def __init__(self, call: Call, put_if: PutIf, batch_write: BatchWrite, table: str, *, now: Callable[[], float],
                 dedupe_ttl_seconds: int) -> None:
        self._call = call
        self._put_if = put_if
        self._batch_write = batch_write
        self._table = table
        self._now = now
        self._dedupe_ttl = dedupe_ttl_seconds
        self._last_order_ns = 0
        self._fingerprints: OrderedDict[tuple[str, str], str] = OrderedDict()

    def item(self, ref: ActorRef, message: InboxMessage, *, order: int | None = None) -> dict[str, Any]:
        """The pending item; `order` None takes the next send-order stamp (a check passes a stand-in: its size
        is the same, 20 digits)."""
        fingerprint = message.fingerprint()
        return {"pk": {"S": ref.id}, "sk": {"S": INBOX_PREFIX + message.id},
                "pq": {"S": f"{self._order_ns() if order is None else order:020d}#{message.id}"},
                "m": {"S": dumps(message.model_dump(mode="json"))}, "h": {"S": fingerprint},
                "et": {"N": repr(self._now())}}  # enqueue time on the store's clock (the commits' clock)

    @staticmethod
    def parts(message: InboxMessage) -> list[tuple[str, int]]:
        return [("the message body", json_size(message.body)),
                ("its action arguments", json_size(message.args))]

    async def put(self, ref: ActorRef, message_id: str, item: dict[str, Any]) -> bool:
        """The conditional put: False when the id is there already (pending or tombstone)."""
        if not await self._put_if(item, "attribute_not_exists(pk)", {}):
            return False
        self._remember(ref, message_id, item["h"]["S"])
        return True

    async def fingerprint(self, ref: ActorRef, message_id: str) -> str | None:
        response = await self._call("GetItem", TableName=self._table, ConsistentRead=True, ProjectionExpression="h",
                                    Key={"pk": {"S": ref.id}, "sk": {"S": INBOX_PREFIX + message_id}})
        value = response.get("Item", {}).get("h", {}).get("S")
        return str(value) if value is not None else None

    def live(self, ref: ActorRef, pending: list[dict[str, Any]], chain: list[Side]) -> tuple[list[InboxMessage],
                                                                                           set[str]]:
        """(the live inbox, every id the load saw): pending items minus those the chain consumed (tombstoned
        only before the next snapshot)."""
        consumed_at = {mid: side.at for side in chain for mid in side.consumed}
        inbox: list[InboxMessage] = []
        held: set[str] = set()
        window = self._dedupe_ttl / 2
        for item in pending:  # the index returns them in send order
            message = InboxMessage.model_validate(json.loads(item["m"]["S"]))
            held.add(message.id)
            if "h" in item:
                self._remember(ref, message.id, item["h"]["S"])
            at = consumed_at.get(message.id)
            # A pending item enqueued long after that consumption is the same id re-sent after the dedupe
            # window (its tombstone expired): a new message.
            if at is None or float(item["et"]["N"]) > at + window:
                inbox.append(message)
        return inbox, held

    async def write_tombstones(self, ref: ActorRef, message_ids: Iterable[str], version: int) -> None:
        """Replace consumed messages' items by tombstones: out of the `pending` index, a duplicate id
        is still refused by the conditional enqueue until the TTL ends the dedupe window."""
        ids = list(dict.fromkeys(message_ids))
        known = {mid: self._fingerprints.get((ref.id, mid)) for mid in ids}
        unknown = [mid for mid, fingerprint in known.items() if fingerprint is None]
        if unknown:
            known.update(await self._read_fingerprints(ref, unknown))
        expires = {"N": str(int(self._now() + self._dedupe_ttl))}
        items = []
        for mid in ids:
            item = {"pk": {"S": ref.id}, "sk": {"S": INBOX_PREFIX + mid}, "t": {"N": str(version)},
                    TTL_ATTRIBUTE: expires}
            if known.get(mid):
                item["h"] = {"S": str(known[mid])}
            items.append(item)
        await self._batch_write(items)
        for mid in ids:
            self._fingerprints.pop((ref.id, mid), None)

    async def _read_fingerprints(self, ref: ActorRef, message_ids: list[str]) -> dict[str, str | None]:
        found: dict[str, str | None] = {}
        for start in range(0, len(message_ids), _BATCH_GET_MAX):
            keys: list[dict[str, Any]] = [{"pk": {"S": ref.id}, "sk": {"S": INBOX_PREFIX + mid}}
                                          for mid in message_ids[start:start + _BATCH_GET_MAX]]
            for attempt in range(6):  # throttled keys come back unprocessed: a few tries, then without them
                response = await self._call("BatchGetItem", RequestItems={self._table: {
                    "Keys": keys, "ConsistentRead": True, "ProjectionExpression": "sk, h"}})
                for item in response.get("Responses", {}).get(self._table, []):
                    if "h" in item:
                        found[item["sk"]["S"][len(INBOX_PREFIX):]] = item["h"]["S"]
                keys = response.get("UnprocessedKeys", {}).get(self._table, {}).get("Keys", [])
                if not keys:
                    break
                await asyncio.sleep(0.02 * 2 ** attempt)
        return found

    def _remember(self, ref: ActorRef, message_id: str, fingerprint: str) -> None:
        key = (ref.id, message_id)
        self._fingerprints[key] = fingerprint
        self._fingerprints.move_to_end(key)
        while len(self._fingerprints) > _FINGERPRINTS_KEPT:
            self._fingerprints.popitem(last=False)

    def _order_ns(self) -> int:
        """Strictly increasing within this store: the send order of messages enqueued through it."""
        self._last_order_ns = max(time.time_ns(), self._last_order_ns + 1)
        return self._last_order_ns
