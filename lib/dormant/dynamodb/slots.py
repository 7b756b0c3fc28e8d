"""Flow-control limits on DynamoDB (EventStore's `acquire_slot`, `renew_slot`, `release_slot`; docs/storage.md,
"Limits"): single-item conditional writes in a partition of their own per limit, never TransactWriteItems.

Partition `limit#<name>` (actor ids always hold a `/`, limit names never do: no clash) holds:

- `s#<index>`: a held slot (index below the concurrency), `h` the holder's hash, `a` its actor id, `ex` its lease's
  end on the runtime's clock. Taken with a PutItem conditional on `attribute_not_exists(pk) OR ex <= :now OR
  h = :h` (free, run out, or the holder's own: a re-run after a crash takes the slot it had, never a second one),
  renewed with a PutItem conditional on `h = :h`, released with a DeleteItem conditional on `h = :h`.
- `t#<window>#<n>`: the n-th start asked for in a rate window (`attribute_not_exists(pk)`): the first `per_window`
  tickets start, the later ones are refused with their place in that line.
- `w#<since>#<holder hash>`: a step waiting for a slot, oldest first (`n`, `k`: its actor; `until`: when the entry
  is stale). A release takes the oldest out (a DeleteItem conditional on it still being there: one release, one
  waiter) and wakes its actor.

Only DynamoDB's item-level actions the deployed roles already grant (GetItem, PutItem, DeleteItem, Query).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from typing import TYPE_CHECKING, Any

from dormant.core.slots import SlotLease, SlotRefusal, SlotRequest
from dormant.dynamodb.batches import ConditionFailed
from dormant.dynamodb.table import TTL_ATTRIBUTE
from dormant.ports import ActorRef

if TYPE_CHECKING:
    from dormant.dynamodb.store import DynamoEventStore

PARTITION = "limit#"
SLOT, TICKET, WAITER = "s#", "t#", "w#"
SLOT_ROUNDS = 4  # reads of the held slots per acquire when others take the free ones first
SLOT_TRIES = 3  # free slots tried (at random) per read
TICKET_TRIES, TICKET_RECOUNT = 64, 8  # ticket puts per ask at most; count again after every 8 lost
WAKE_CANDIDATES = 4  # waiters read per release (a concurrent release may take the oldest first)
WAITER_TTL = 900.0  # as dormant.memory.slots.WAITER_TTL
ITEM_TTL = 2 * 24 * 3600  # seconds (real time) after which DynamoDB may delete a forgotten item


def holder_hash(holder: str) -> str:
    return hashlib.sha256(holder.encode()).hexdigest()[:32]


def waiter_key(request: SlotRequest) -> str:
    return f"{WAITER}{request.queued_since:020.6f}#{holder_hash(request.holder)}"


def _n(value: float) -> dict[str, str]:
    return {"N": repr(float(value))}


async def acquire_slot(store: DynamoEventStore, request: SlotRequest) -> SlotLease | SlotRefusal:
    rule, pk = request.rule, {"S": PARTITION + request.rule.name}
    slot: int | None = None
    queued = request.queued
    if rule.concurrency is not None:
        taken = await _take_slot(store, request, pk)
        if isinstance(taken, SlotRefusal):
            return taken
        slot, queued_now = taken
        queued = queued or queued_now
    if rule.per_window is not None:
        window, ticket = await _take_ticket(store, request, pk)
        if ticket >= rule.per_window:
            if slot is not None:  # it does not start: the slot goes back
                await _delete_slot(store, pk, slot, holder_hash(request.holder))
            return SlotRefusal(limit=rule.name, by="rate", window=window, position=ticket - rule.per_window)
    if queued:
        await store._call("DeleteItem", TableName=store.table, Key={"pk": pk, "sk": {"S": waiter_key(request)}})
    return SlotLease(limit=rule.name, holder=request.holder, actor=request.ref.id, slot=slot,
                     expires=request.lease_until)


async def _take_slot(store: DynamoEventStore, request: SlotRequest,
                     pk: dict[str, str]) -> tuple[int, bool] | SlotRefusal:
    """(the slot taken, whether this call put the request in the line) or the refusal."""
    rule, now, me = request.rule, request.now, holder_hash(request.holder)
    assert rule.concurrency is not None
    queued = False
    for _ in range(SLOT_ROUNDS):
        held = {int(item["sk"]["S"][len(SLOT):]): item for item in await store._query_all(
            TableName=store.table, ConsistentRead=True, KeyConditionExpression="pk = :pk AND begins_with(sk, :s)",
            ExpressionAttributeValues={":pk": pk, ":s": {"S": SLOT}})}
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
                    await store._call("PutItem", TableName=store.table, Item={
                        "pk": pk, "sk": {"S": waiter_key(request)}, "n": {"S": request.ref.name},
                        "k": {"S": json.dumps(list(request.ref.key))}, "until": _n(free_at + WAITER_TTL),
                        TTL_ATTRIBUTE: {"N": str(int(store._now() + ITEM_TTL))}})
                    queued = True
                    continue
                return SlotRefusal(limit=rule.name, by="concurrency", free_at=free_at)
            choices = free
        for index in choices:
            if await store._put_if(_slot_item(store, pk, index, me, request.ref.id, request.lease_until),
                                   "attribute_not_exists(pk) OR ex <= :now OR h = :h",
                                   {":now": _n(now), ":h": {"S": me}}):
                return index, queued
    # Others kept taking the free slots first: a refusal that asks again at once (plus the jitter).
    return SlotRefusal(limit=rule.name, by="concurrency", free_at=now)


def _free_slots(held: dict[int, dict[str, Any]], concurrency: int, now: float) -> list[int]:
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


async def _take_ticket(store: DynamoEventStore, request: SlotRequest, pk: dict[str, str]) -> tuple[int, int]:
    """(the window, the ticket taken in it): tickets below `per_window` start. Each put that fails is a ticket someone
    else took, so the tries move forward only (counting again now and then, to skip what a crowd took meanwhile)."""
    rule = request.rule
    window = math.floor(request.now / rule.window)
    prefix = f"{TICKET}{window:012d}#"
    ticket = await _count(store, pk, prefix)
    for tries in range(1, TICKET_TRIES + 1):
        item = {"pk": pk, "sk": {"S": f"{prefix}{ticket:06d}"},
                TTL_ATTRIBUTE: {"N": str(int(store._now() + ITEM_TTL))}}
        if await store._put_if(item, "attribute_not_exists(pk)", {}):
            return window, ticket
        ticket = max(ticket + 1, await _count(store, pk, prefix)) if tries % TICKET_RECOUNT == 0 else ticket + 1
    return window, ticket  # a crowd of more than TICKET_TRIES at once: refused, behind those that got one


async def _count(store: DynamoEventStore, pk: dict[str, str], prefix: str) -> int:
    count = 0
    kwargs: dict[str, Any] = {"TableName": store.table, "ConsistentRead": True, "Select": "COUNT",
                              "KeyConditionExpression": "pk = :pk AND begins_with(sk, :t)",
                              "ExpressionAttributeValues": {":pk": pk, ":t": {"S": prefix}}}
    while True:
        response = await store._call("Query", **kwargs)
        count += int(response.get("Count", 0))
        if "LastEvaluatedKey" not in response:
            return count
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


async def renew_slot(store: DynamoEventStore, lease: SlotLease, until: float) -> bool:
    if lease.slot is None:
        return True
    pk, me = {"S": PARTITION + lease.limit}, holder_hash(lease.holder)
    return await store._put_if(_slot_item(store, pk, lease.slot, me, lease.actor, until), "h = :h",
                               {":h": {"S": me}})


async def release_slot(store: DynamoEventStore, lease: SlotLease, now: float) -> list[ActorRef]:
    if lease.slot is None:
        return []
    pk = {"S": PARTITION + lease.limit}
    if not await _delete_slot(store, pk, lease.slot, holder_hash(lease.holder)):
        return []  # its lease ran out and someone else has the slot: nothing freed
    response = await store._call("Query", TableName=store.table, ConsistentRead=True, Limit=WAKE_CANDIDATES,
                                 KeyConditionExpression="pk = :pk AND begins_with(sk, :w)",
                                 ExpressionAttributeValues={":pk": pk, ":w": {"S": WAITER}})
    for item in response.get("Items", []):
        try:
            await store._call("DeleteItem", TableName=store.table, Key={"pk": pk, "sk": item["sk"]},
                              ConditionExpression="attribute_exists(pk)")
        except ConditionFailed:
            continue  # another release took this one out first
        if float(item["until"]["N"]) > now:
            return [ActorRef(name=item["n"]["S"], key=tuple(json.loads(item["k"]["S"])))]
    return []


async def _delete_slot(store: DynamoEventStore, pk: dict[str, str], slot: int, me: str) -> bool:
    try:
        await store._call("DeleteItem", TableName=store.table, Key={"pk": pk, "sk": {"S": f"{SLOT}{slot:05d}"}},
                          ConditionExpression="h = :h", ExpressionAttributeValues={":h": {"S": me}})
    except ConditionFailed:
        return False
    return True


def _slot_item(store: DynamoEventStore, pk: dict[str, str], slot: int, me: str, actor: str,
               until: float) -> dict[str, Any]:
    return {"pk": pk, "sk": {"S": f"{SLOT}{slot:05d}"}, "h": {"S": me}, "a": {"S": actor}, "ex": _n(until),
            TTL_ATTRIBUTE: {"N": str(int(store._now() + ITEM_TTL))}}
