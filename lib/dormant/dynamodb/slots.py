"""Flow-control limits on DynamoDB (EventStore's `acquire_slot`, `renew_slot`, `release_slot`; docs/storage.md,
"Limits"): single-item conditional writes in a partition of their own per limit, never TransactWriteItems.

Partition `limit#<name>` (actor ids always hold a `/`, limit names never do: no clash) holds:

- `s#<index>`: a held slot (index below the concurrency), `h` the holder's hash, `a` its actor id, `ex` its lease's
  end on the runtime's clock. Taken with a PutItem conditional on `attribute_not_exists(pk) OR ex <= :now OR
  h = :h` (free, run out, or the holder's own: a re-run after a crash takes the slot it had, never a second one),
  renewed with a PutItem conditional on `h = :h`, released with a DeleteItem conditional on `h = :h`.
- `t#<window>#<n>`: the n-th start asked for in a rate window (`attribute_not_exists(pk)`): the first `per_window`
  tickets start, the later ones are refused with their place in that line.
- `w#<rank>#<holder hash>`: a step waiting for a slot, in rank order (dormant.core.slots.line_rank: when it began
  waiting, moved by its priority; `n`, `k`: its actor; `until`: when the entry is stale). A release takes the first
  out (a DeleteItem conditional on it still being there: one release, one waiter) and wakes its actor.

A keyed limit has one such partition per key, `limit#<name>#k#<hash of the key>` (dormant.dynamodb.keys): each
request reads one key's items only, and a key with nothing held or waiting has no items but its rate tickets
(gone by their time to live).

Only DynamoDB's item-level actions the deployed roles already grant (GetItem, PutItem, DeleteItem, Query).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable

from dormant.core.records import ActorRef
from dormant.core.slots import SlotLease, SlotRefusal, SlotRequest
from dormant.dynamodb.keys import (
    SLOT_PREFIX,
    WAITER_PREFIX,
    limit_partition,
    slot_index,
    slot_key,
    ticket_key,
    ticket_prefix,
    waiter_key,
)
from dormant.dynamodb.requests import Item, Table
from dormant.dynamodb.table import TTL_ATTRIBUTE

SLOT_ROUNDS = 4  # reads of the held slots per acquire when others take the free ones first
SLOT_TRIES = 3  # free slots tried (at random) per read
TICKET_TRIES, TICKET_RECOUNT = 64, 8  # ticket puts per ask at most; count again after every 8 lost
WAKE_CANDIDATES = 4  # waiters read per release (a concurrent release may take the oldest first)
WAITER_TTL = 900.0  # as dormant.memory.slots.WAITER_TTL
ITEM_TTL = 2 * 24 * 3600  # seconds (real time) after which DynamoDB may delete a forgotten item


def holder_hash(holder: str) -> str:
    return hashlib.sha256(holder.encode()).hexdigest()[:32]


def _n(value: float) -> dict[str, str]:
    return {"N": repr(float(value))}


class DynamoSlots:
    """The limits' items of one table (EventStore's `acquire_slot`, `renew_slot`, `release_slot`). `clock`: the
    store's, for the items' time to live (leases are on the runtime's clock, which the requests carry)."""

    def __init__(self, table: Table, clock: Callable[[], float]) -> None:
        self.table = table
        self._now = clock

    async def acquire_slot(self, request: SlotRequest) -> SlotLease | SlotRefusal:
        rule, pk = request.rule, limit_partition(request.rule.name, request.rule.key)
        slot: int | None = None
        queued = request.queued
        if rule.concurrency is not None:
            taken = await self._take_slot(request, pk)
            if isinstance(taken, SlotRefusal):
                return taken
            slot, queued_now = taken
            queued = queued or queued_now
        if rule.per_window is not None:
            window, ticket = await self._take_ticket(request, pk)
            if ticket >= rule.per_window:
                if slot is not None:  # it does not start: the slot goes back
                    await self._delete_slot(pk, slot, holder_hash(request.holder))
                return SlotRefusal(limit=rule.name, by="rate", window=window, position=ticket - rule.per_window)
        if queued:
            await self.table.delete(self._key(pk, _waiter(request)))
        return SlotLease(limit=rule.name, holder=request.holder, actor=request.ref.id, slot=slot,
                         expires=request.lease_until, key=rule.key)

    async def renew_slot(self, lease: SlotLease, until: float) -> bool:
        if lease.slot is None:
            return True
        pk, me = limit_partition(lease.limit, lease.key), holder_hash(lease.holder)
        return await self.table.put(self._slot_item(pk, lease.slot, me, lease.actor, until, lease.key), "h = :h",
                                    {":h": {"S": me}})

    async def release_slot(self, lease: SlotLease, now: float) -> list[ActorRef]:
        if lease.slot is None:
            return []
        pk = limit_partition(lease.limit, lease.key)
        if not await self._delete_slot(pk, lease.slot, holder_hash(lease.holder)):
            return []  # its lease ran out and someone else has the slot: nothing freed
        page = await self.table.query_page("pk = :pk AND begins_with(sk, :w)",
                                           {":pk": pk, ":w": {"S": WAITER_PREFIX}}, limit=WAKE_CANDIDATES)
        for item in page.items:
            if not await self.table.delete({"pk": pk, "sk": item["sk"]}, "attribute_exists(pk)"):
                continue  # another release took this one out first
            if float(item["until"]["N"]) > now:
                return [ActorRef(name=item["n"]["S"], key=tuple(json.loads(item["k"]["S"])))]
        return []

    async def _take_slot(self, request: SlotRequest, pk: dict[str, str]) -> tuple[int, bool] | SlotRefusal:
        """(the slot taken, whether this call put the request in the line) or the refusal."""
        rule, now, me = request.rule, request.now, holder_hash(request.holder)
        assert rule.concurrency is not None
        queued = False
        for _ in range(SLOT_ROUNDS):
            held = {slot_index(item["sk"]["S"]): item for item in await self.table.query(
                "pk = :pk AND begins_with(sk, :s)", {":pk": pk, ":s": {"S": SLOT_PREFIX}})}
            mine = [index for index, item in held.items() if item["h"]["S"] == me]
            if mine:
                choices = mine[:1]
            else:
                free = _free_slots(held, rule.concurrency, now)
                if not free:
                    free_at = min(float(item["ex"]["N"]) for item in held.values())
                    if not queued:
                        # Into the line first, then look again: a release either finds this waiter (and wakes it) or
                        # came before this second look, which then sees its slot free. No wake-up is lost in between.
                        await self.table.put({**self._key(pk, _waiter(request)), "n": {"S": request.ref.name},
                                              "k": {"S": json.dumps(list(request.ref.key))},
                                              "until": _n(free_at + WAITER_TTL), TTL_ATTRIBUTE: self._ttl()})
                        queued = True
                        continue
                    return SlotRefusal(limit=rule.name, by="concurrency", free_at=free_at)
                choices = free
            for index in choices:
                if await self.table.put(self._slot_item(pk, index, me, request.ref.id, request.lease_until, rule.key),
                                        "attribute_not_exists(pk) OR ex <= :now OR h = :h",
                                        {":now": _n(now), ":h": {"S": me}}):
                    return index, queued
        # Others kept taking the free slots first: a refusal that asks again at once (plus the jitter).
        return SlotRefusal(limit=rule.name, by="concurrency", free_at=now)

    async def _take_ticket(self, request: SlotRequest, pk: dict[str, str]) -> tuple[int, int]:
        """(the window, the ticket taken in it): tickets below `per_window` start. Each put that fails is a ticket
        someone else took, so the tries move forward only (counting again now and then, to skip what a crowd took
        meanwhile)."""
        rule = request.rule
        window = math.floor(request.now / rule.window)
        prefix = ticket_prefix(window)
        ticket = await self._count(pk, prefix)
        for tries in range(1, TICKET_TRIES + 1):
            if await self.table.put({**self._key(pk, ticket_key(prefix, ticket)), TTL_ATTRIBUTE: self._ttl()},
                                    "attribute_not_exists(pk)"):
                return window, ticket
            ticket = max(ticket + 1, await self._count(pk, prefix)) if tries % TICKET_RECOUNT == 0 else ticket + 1
        return window, ticket  # a crowd of more than TICKET_TRIES at once: refused, behind those that got one

    async def _count(self, pk: dict[str, str], prefix: str) -> int:
        return await self.table.count("pk = :pk AND begins_with(sk, :t)", {":pk": pk, ":t": {"S": prefix}})

    async def _delete_slot(self, pk: dict[str, str], slot: int, me: str) -> bool:
        return await self.table.delete(self._key(pk, slot_key(slot)), "h = :h", {":h": {"S": me}})

    def _slot_item(self, pk: dict[str, str], slot: int, me: str, actor: str, until: float, key: str | None) -> Item:
        item = {**self._key(pk, slot_key(slot)), "h": {"S": me}, "a": {"S": actor}, "ex": _n(until),
                TTL_ATTRIBUTE: self._ttl()}
        if key is not None:  # (the partition has only its hash)
            item["lk"] = {"S": key}
        return item

    def _ttl(self) -> dict[str, str]:
        return {"N": str(int(self._now() + ITEM_TTL))}

    @staticmethod
    def _key(pk: dict[str, str], sort_key: str) -> Item:
        return {"pk": pk, "sk": {"S": sort_key}}


def _waiter(request: SlotRequest) -> str:
    return waiter_key(request.rank, holder_hash(request.holder))


def _free_slots(held: dict[int, Item], concurrency: int, now: float) -> list[int]:
    """Up to SLOT_TRIES free (or run-out) slot indexes, at random: askers at the same moment seldom pick the same."""
    def free(index: int) -> bool:
        return index not in held or float(held[index]["ex"]["N"]) <= now

    if len(held) * 2 <= concurrency:  # mostly free: a few random picks find some (no walk over every index)
        picks = {random.randrange(concurrency) for _ in range(SLOT_TRIES * 2)}
        found = [index for index in picks if free(index)][:SLOT_TRIES]
        if found:
            return found
    everything = [index for index in range(concurrency) if free(index)]
    return random.sample(everything, min(len(everything), SLOT_TRIES))
