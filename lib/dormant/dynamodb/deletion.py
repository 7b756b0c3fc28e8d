"""Deleting an actor from the DynamoDB table: every item of its partition, in an order that keeps it loadable.

0. With a time (`at`), a *deletion mark* (`x#`) first: it outlives the actor (never deleted, one small item), so a
   wake-up of a request made before the deletion, arriving later, is dropped (dormant.runtime.wake).
1. A *marker* commit: the next version of the ring, conditional like any commit, carrying no data. From then
   on loads find no actor and every writer that read an older version loses its condition.
2. The marker is copied into slot 0 (`c#000`, conditional on what was there): `exists` and `create` look only
   at slot 0, so the actor counts as gone and cannot be re-created until the deletion has finished.
3. Every other item of the partition but the mark is deleted, page by page (BatchWriteItem), until only slot 0 is
   left, then every S3 object under the actor's prefixes (its large values, dormant.s3.large_values).
4. Slot 0 goes last (conditional on still holding the marker): a create then starts a new incarnation.

Interrupted at any point, running it again finishes the job (it finds the marker in slot 0 and goes on from
step 3). A wake-up that read the actor before the marker and commits after its slot was deleted leaves one
commit behind: a later incarnation never reads it (commit items carry their incarnation; loads keep only slot
0's), overwrites it when its own ring reaches that slot, and a second delete removes it.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from dormant.dynamodb.batches import ConditionFailed, delete_all
from dormant.dynamodb.items import compress, ring_key
from dormant.errors import StorageError
from dormant.ports import ActorRef

if TYPE_CHECKING:
    from dormant.dynamodb.store import DynamoEventStore

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 5
SLOT_ZERO = ring_key(1, 1)
DELETION_MARK = "x#"  # when the actor was last deleted: kept, so a late wake-up of an earlier request is dropped


async def delete_actor(store: DynamoEventStore, ref: ActorRef, at: float | None = None) -> bool:
    """Delete every item of `ref`'s partition but its deletion mark; True if a live (or half-deleted) actor was
    there. `at` (the runtime's clock) goes into the mark first: from then on no wake-up carrying an older request
    re-creates the actor or stores its message (dormant.runtime.wake)."""
    if at is not None:
        await _mark_deleted(store, ref, at)
    for _ in range(MAX_ATTEMPTS):
        ring = await store._query_ring(ref)
        anchor = next((item for item in ring if item["sk"]["S"] == SLOT_ZERO), None)
        if anchor is None:  # no actor: still remove what its partition holds (early messages, leftovers)
            await _delete_all_but_slot_zero(store, ref)
            await store.values.delete_actor(ref)
            return False
        if "gone" not in anchor and not await _mark(store, ref, ring, anchor):
            continue  # a commit got in first: read again
        await _delete_all_but_slot_zero(store, ref)
        await store.values.delete_actor(ref)  # before slot 0: a re-run of an interrupted deletion finds the marker
        incarnation = anchor.get("c", {"S": ""})
        if await _delete_if(store, ref, SLOT_ZERO, "attribute_exists(gone) AND c = :c", {":c": incarnation}):
            log.info("deleted actor %s", ref)
        for key in [key for key in store._cache if key[0] == ref.id]:
            del store._cache[key]
        return True
    raise StorageError(f"could not delete {ref}: it kept changing under the deletion ({MAX_ATTEMPTS} attempts); "
                       "run the deletion again")


async def _mark(store: DynamoEventStore, ref: ActorRef, ring: list[dict[str, Any]],
                anchor: dict[str, Any]) -> bool:
    """Steps 1 and 2: the marker commit, then its copy in slot 0. False when another writer won a condition."""
    incarnation = anchor.get("c", {"S": ""})
    ours = [item for item in ring if item.get("c", {"S": ""}) == incarnation]
    size = int(anchor["n"]["N"])
    version = max(int(item["v"]["N"]) for item in ours) + 1
    marker = {"pk": {"S": ref.id}, "sk": {"S": ring_key(version, size)}, "v": {"N": str(version)},
              "n": {"N": str(size)}, "at": {"N": repr(store._now())}, "c": incarnation, "gone": {"BOOL": True},
              "snap": {"BOOL": True}, "z": {"B": compress({})}}
    if version <= size:
        condition, values = "attribute_not_exists(pk) OR c < :c", {":c": incarnation}
    else:
        condition, values = "v = :previous AND c = :c", {":previous": {"N": str(version - size)}, ":c": incarnation}
    if not await store._put_if(marker, condition, values):
        return False
    if marker["sk"]["S"] != SLOT_ZERO:
        copy = {**marker, "sk": {"S": SLOT_ZERO}}
        if not await store._put_if(copy, "v = :seen AND c = :c", {":seen": anchor["v"], ":c": incarnation}):
            return False
    return True


async def _delete_all_but_slot_zero(store: DynamoEventStore, ref: ActorRef) -> None:
    """Step 3, repeated until a fresh read of the partition finds nothing but slot 0."""
    for _ in range(MAX_ATTEMPTS):
        keys: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": store.table, "ConsistentRead": True, "ProjectionExpression": "sk",
                                  "KeyConditionExpression": "pk = :pk",
                                  "ExpressionAttributeValues": {":pk": {"S": ref.id}}}
        while True:
            response = await store._call("Query", **kwargs)
            keys += [{"pk": {"S": ref.id}, "sk": item["sk"]} for item in response.get("Items", [])
                     if item["sk"]["S"] not in (SLOT_ZERO, DELETION_MARK)]
            if "LastEvaluatedKey" not in response:
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        if not keys:
            return
        await delete_all(store._call, store.table, keys)
    raise StorageError(f"items of {ref} kept appearing while it was deleted; run the deletion again")


async def _delete_if(store: DynamoEventStore, ref: ActorRef, sort_key: str, condition: str,
                     values: dict[str, Any]) -> bool:
    try:
        await store._call("DeleteItem", TableName=store.table, Key={"pk": {"S": ref.id}, "sk": {"S": sort_key}},
                          ConditionExpression=condition, ExpressionAttributeValues=values)
    except ConditionFailed:
        return False  # another deletion got there first
    return True


async def _mark_deleted(store: DynamoEventStore, ref: ActorRef, at: float) -> None:
    """The deletion mark, moved forward only (a slow deleter never moves it back)."""
    with contextlib.suppress(ConditionFailed):  # a later deletion's mark is there already
        await store._call("PutItem", TableName=store.table, Item={
            "pk": {"S": ref.id}, "sk": {"S": DELETION_MARK}, "at": {"N": repr(at)}},
            ConditionExpression="attribute_not_exists(pk) OR #at < :at", ExpressionAttributeNames={"#at": "at"},
            ExpressionAttributeValues={":at": {"N": repr(at)}})


async def deleted_at(store: DynamoEventStore, ref: ActorRef) -> float | None:
    """When `ref` was last deleted (its mark), None if never: one consistent GetItem."""
    response = await store._call("GetItem", TableName=store.table, ConsistentRead=True,
                                 Key={"pk": {"S": ref.id}, "sk": {"S": DELETION_MARK}})
    item = response.get("Item")
    return float(item["at"]["N"]) if item is not None else None
