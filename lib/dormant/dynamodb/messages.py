"""The inbox items of the DynamoDB store: `i#<message id>` per message, pending (in the sparse `pending`
index, in send order) until a commit consumes it, then a tombstone that keeps the id a duplicate until the dedupe
window after that commit ends (dormant.core.dedupe; docs/storage.md, "Inbox"). The last wake-up error (`w#`) shares
their index, first, so the load's one Query of it reads both. A running wake-up's polling of them is in
dormant.dynamodb.inbox.

Both forms carry the message's fingerprint `h` (InboxMessage.fingerprint): a reused idempotency key is
compared with the first request even after that was consumed. Tombstones are written from fingerprints
this store saw on its loads (the pending items of consumed messages stay in the index until their
tombstone is written, so every load of the actor reads them); the few it has not seen are read first.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from dormant.core.dedupe import dedupe_expiry, dedupe_until, is_duplicate
from dormant.core.records import ActorRef, InboxMessage, WakeError
from dormant.dynamodb.items import dumps, json_size
from dormant.dynamodb.keys import (
    PENDING_INDEX,
    WAKE_ERROR,
    WAKE_ERROR_ORDER,
    inbox_key,
    inbox_order,
    item_key,
    message_id_of,
)
from dormant.dynamodb.requests import Item, Table
from dormant.dynamodb.table import TTL_ATTRIBUTE

_FINGERPRINTS_KEPT = 50_000
_SKIPPED_AT_MOST = 99  # ids a pending Query's filter leaves out (DynamoDB: at most 100 operands of IN)
# A put of a message: where no item is, or over a tombstone whose dedupe window has ended (pending items have no
# `expires_at`: a comparison with a missing attribute is false). dormant.core.dedupe.is_duplicate, as a condition.
_NEW_ID = "attribute_not_exists(pk) OR #expires <= :now"


@dataclass(slots=True)
class Pending:
    """What a Query of an actor's `pending` index finds: its pending messages' items, in send order, and its last
    wake-up error."""

    messages: list[Item]
    wake_error: WakeError | None
    skipped: frozenset[str] = frozenset()  # consumed ids the Query left out (`InboxItems.pending`'s `consumed`)


class InboxItems:
    """Writes and reads the inbox items (and the wake error) of one table."""

    def __init__(self, table: Table, *, clock: Callable[[], float], dedupe_ttl_seconds: int) -> None:
        """`clock`: the store's (enqueue times, the dedupe window's end)."""
        self.table = table
        self._now = clock
        self._window = float(dedupe_ttl_seconds)
        self._last_order_ns = 0
        self._fingerprints: OrderedDict[tuple[str, str], str] = OrderedDict()

    def item(self, ref: ActorRef, message: InboxMessage, *, order: int | None = None) -> Item:
        """The pending item; `order` None takes the next send-order stamp (a check passes a stand-in: its size
        is the same, 20 digits)."""
        fingerprint = message.fingerprint()
        return {**item_key(ref.id, inbox_key(message.id)),
                "pq": {"S": inbox_order(self._order_ns() if order is None else order, message.id)},
                "m": {"S": dumps(message.model_dump(mode="json"))}, "h": {"S": fingerprint},
                "et": {"N": repr(self._now())}}  # enqueue time on the store's clock (the commits' clock)

    @staticmethod
    def parts(message: InboxMessage) -> list[tuple[str, int]]:
        return [("the message body", json_size(message.body)),
                ("its action arguments", json_size(message.args))]

    async def put(self, ref: ActorRef, message_id: str, item: Item) -> bool:
        """The conditional put: False when the id is a duplicate (pending, or a tombstone within its window)."""
        if not await self.table.put(item, _NEW_ID, {":now": {"N": repr(self._now())}}, {"#expires": TTL_ATTRIBUTE}):
            return False
        self._remember(ref, message_id, item["h"]["S"])
        return True

    async def fingerprint(self, ref: ActorRef, message_id: str) -> str | None:
        """The stored fingerprint of a duplicate id (None: none is stored, or its window has ended)."""
        item = await self.table.get(item_key(ref.id, inbox_key(message_id)), projection="h, #expires",
                                    names={"#expires": TTL_ATTRIBUTE})
        if item is None or "h" not in item:
            return None
        until = float(item[TTL_ATTRIBUTE]["N"]) if TTL_ATTRIBUTE in item else None
        return str(item["h"]["S"]) if is_duplicate(until, self._now()) else None

    async def pending(self, ref: ActorRef, consumed: Mapping[str, float] | None = None) -> Pending:
        """One strongly consistent Query of the actor's `pending` index.

        `consumed` (id -> when, by the commits since the snapshot of a version the load holds already: their items
        are still pending until the next snapshot tombstones them, Head.chain_consumed): their items are left out of the
        answer by a filter, where the id is still a duplicate (its dedupe window open: an item under it can only be
        that consumed message, which the load would hide), so that they (up to a ring's worth of commits' messages) are
        neither sent nor parsed.
        The filter does not change the read units (DynamoDB bills what it reads before filtering)."""
        values: dict[str, dict[str, str]] = {":pk": {"S": ref.id}}
        now = self._now()
        skipped = [mid for mid, at in (consumed or {}).items()
                   if is_duplicate(dedupe_until(at, self._window), now)][:_SKIPPED_AT_MOST]
        options: dict[str, str] = {}
        if skipped:
            values.update((f":s{n}", {"S": inbox_key(mid)}) for n, mid in enumerate(skipped))
            options["filter_expression"] = f"NOT (sk IN ({', '.join(f':s{n}' for n in range(len(skipped)))}))"
        items = await self.table.query("pk = :pk", values, index=PENDING_INDEX, **options)
        errors = [item for item in items if item["sk"]["S"] == WAKE_ERROR]
        return Pending(messages=[item for item in items if "m" in item],
                       wake_error=WakeError.model_validate_json(errors[0]["d"]["S"]) if errors else None,
                       skipped=frozenset(skipped))

    def live(self, ref: ActorRef, pending: Pending, consumed: Mapping[str, float]) -> tuple[list[InboxMessage],
                                                                                         set[str]]:
        """(the live inbox, every id the load saw): pending items minus those consumed (`consumed`: id -> when, by the
        commits since the snapshot, whose messages are tombstoned only by the next snapshot commit). The ids the
        Query left out count as seen: they are consumed, and still duplicates."""
        inbox: list[InboxMessage] = []
        held: set[str] = set(pending.skipped)
        for item in pending.messages:  # the index returns them in send order
            message_id = message_id_of(item["sk"]["S"])  # (the key holds the id: `item`)
            held.add(message_id)
            if "h" in item:
                self._remember(ref, message_id, item["h"]["S"])
            at = consumed.get(message_id)
            # A pending item enqueued once that consumption's window had ended is the same id sent again: a new
            # message (its tombstone, written early, had expired). Consumed ones are not parsed: most pending
            # items a load reads are those, until the next snapshot commit tombstones them.
            if at is None or not is_duplicate(dedupe_until(at, self._window), float(item["et"]["N"])):
                inbox.append(InboxMessage.model_validate(json.loads(item["m"]["S"])))
        return inbox, held

    async def write_tombstones(self, ref: ActorRef, consumed: Iterable[tuple[str, float]], version: int) -> None:
        """Replace consumed messages' items (id, when it was consumed) by tombstones: out of the `pending` index, a
        duplicate id is still refused by the conditional enqueue until the dedupe window after its consumption
        ends (`expires_at`, which DynamoDB's TTL also deletes them by)."""
        when = dict(consumed)
        known = {mid: self._fingerprints.get((ref.id, mid)) for mid in when}
        unknown = [mid for mid, fingerprint in known.items() if fingerprint is None]
        if unknown:
            known.update(await self._read_fingerprints(ref, unknown))
        items = []
        for mid, at in when.items():
            item = {**item_key(ref.id, inbox_key(mid)), "t": {"N": str(version)},
                    TTL_ATTRIBUTE: {"N": str(dedupe_expiry(at, self._window))}}
            if known.get(mid):
                item["h"] = {"S": str(known[mid])}
            items.append(item)
        await self.table.put_all(items)
        for mid in when:
            self._fingerprints.pop((ref.id, mid), None)

    async def write_wake_error(self, ref: ActorRef, error: WakeError) -> None:
        """The actor's last wake-up error, replacing the one before (first in the `pending` index)."""
        await self.table.put({**item_key(ref.id, WAKE_ERROR), "pq": {"S": WAKE_ERROR_ORDER},
                              "d": {"S": error.model_dump_json()}})

    async def _read_fingerprints(self, ref: ActorRef, message_ids: list[str]) -> dict[str, str | None]:
        # Throttled keys come back unprocessed: a few tries, then without them (a tombstone without `h` only
        # loses the comparison of a reused idempotency key).
        items = await self.table.get_all([item_key(ref.id, inbox_key(mid)) for mid in message_ids], "sk, h",
                                         give_up=True)
        return {message_id_of(item["sk"]["S"]): item["h"]["S"] for item in items if "h" in item}

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

