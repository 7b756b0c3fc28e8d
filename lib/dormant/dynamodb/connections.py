"""WebSocket subscriptions in the table (docs/realtime.md): who is pushed an actor's events.

A subscription is two small TTL items (keys: dormant.dynamodb.keys): `n#<connection id>` in the actor's partition
(the fan-out Queries them: one read per commit that records events) and `n#<actor id>` in the connection's own
partition (its `$disconnect` finds what to remove), beside the connection's caller (`caller`, written at `$connect`
on AWS, where later frames carry no identity). Both expire SUBSCRIPTION_TTL_SECONDS after the subscribe, past
API Gateway's 2-hour connection limit, so a lost `$disconnect` leaves nothing for long.

`events_of(ref, version)` reads the events one commit stored (its events item, settled before the commit returned).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from dormant.core.realtime import SUBSCRIPTION_TTL_SECONDS
from dormant.core.records import ActorRef, EventRecord
from dormant.dynamodb.keys import (
    CONNECTION_CALLER,
    EVENTS_PREFIX,
    SUBSCRIPTION_PREFIX,
    connection_partition,
    item_key,
    subscription_key,
)
from dormant.dynamodb.requests import Item, Table
from dormant.dynamodb.table import TTL_ATTRIBUTE

RECENT_EVENT_ITEMS = 4  # a commit's events item is the newest, or close to it when later commits raced in


@dataclass(frozen=True, slots=True)
class Subscription:
    connection_id: str
    after: int
    at: float


class Connections:
    """The subscription items of one table."""

    def __init__(self, table: Table, clock: Callable[[], float], ttl_seconds: int = SUBSCRIPTION_TTL_SECONDS) -> None:
        self.table = table
        self._now = clock
        self._ttl = ttl_seconds

    async def subscribe(self, ref: ActorRef, connection_id: str, after: int) -> None:
        now = self._now()
        expires = {"N": str(int(now + self._ttl))}
        await self.table.put_all([
            {**item_key(ref.id, subscription_key(connection_id)), "a": {"N": str(after)}, "t": {"N": repr(now)},
             TTL_ATTRIBUTE: expires},
            {**item_key(connection_partition(connection_id), subscription_key(ref.id)),
             "d": {"S": json.dumps({"name": ref.name, "key": list(ref.key)})}, TTL_ATTRIBUTE: expires}])

    async def unsubscribe(self, ref: ActorRef, connection_id: str) -> None:
        await self.table.delete_all([item_key(ref.id, subscription_key(connection_id)),
                                     item_key(connection_partition(connection_id), subscription_key(ref.id))])

    async def of_actor(self, ref: ActorRef, limit: int) -> list[Subscription]:
        """The actor's live subscriptions, oldest first, at most `limit` (one page: a Query of `limit` items)."""
        page = await self.table.query_page("pk = :pk AND begins_with(sk, :n)",
                                           {":pk": {"S": ref.id}, ":n": {"S": SUBSCRIPTION_PREFIX}},
                                           limit=limit)
        found = [Subscription(item["sk"]["S"][len(SUBSCRIPTION_PREFIX):], int(item["a"]["N"]), float(item["t"]["N"]))
                 for item in page.items if not self._expired(item)]
        return sorted(found, key=lambda s: s.at)

    async def subscriptions_of(self, connection_id: str) -> list[ActorRef]:
        items = await self.table.query("pk = :pk AND begins_with(sk, :n)",
                                       {":pk": {"S": connection_partition(connection_id)},
                                        ":n": {"S": SUBSCRIPTION_PREFIX}})
        return [ActorRef.model_validate(json.loads(item["d"]["S"])) for item in items]

    async def drop(self, connection_id: str) -> int:
        """Remove every subscription of a connection (closed, or gone: 410), and who it was; how many there were."""
        refs = await self.subscriptions_of(connection_id)
        for ref in refs:
            await self.unsubscribe(ref, connection_id)
        await self.table.delete(item_key(connection_partition(connection_id), CONNECTION_CALLER))
        return len(refs)

    async def connected(self, connection_id: str, caller: str) -> None:
        """At `$connect`: who the connection is (the caller as JSON), for its later frames."""
        await self.table.put({**item_key(connection_partition(connection_id), CONNECTION_CALLER),
                              "d": {"S": caller}, TTL_ATTRIBUTE: {"N": str(int(self._now() + self._ttl))}})

    async def caller_of(self, connection_id: str) -> str | None:
        item = await self.table.get(item_key(connection_partition(connection_id), CONNECTION_CALLER))
        return None if item is None else str(item["d"]["S"])

    async def events_of(self, ref: ActorRef, version: int) -> list[EventRecord]:
        """The events version `version` of the actor stored (none if its item is not among the newest)."""
        page = await self.table.query_page("pk = :pk AND begins_with(sk, :e)",
                                           {":pk": {"S": ref.id}, ":e": {"S": EVENTS_PREFIX}},
                                           forward=False, limit=RECENT_EVENT_ITEMS)
        for item in page.items:
            if int(item.get("v", {"N": "0"})["N"]) == version:
                return [EventRecord(seq=seq, name=name, payload=payload, at=at)
                        for seq, name, payload, at in json.loads(item["d"]["S"])]
        return []

    def _expired(self, item: Item) -> bool:
        expires = item.get(TTL_ATTRIBUTE)  # DynamoDB deletes expired items lazily: filter on read
        return expires is not None and float(expires["N"]) < self._now()
