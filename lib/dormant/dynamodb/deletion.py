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

import logging
from collections.abc import Callable
from typing import Any

from dormant.core.records import ActorRef
from dormant.dynamodb.items import compress
from dormant.dynamodb.keys import DELETION_MARK, SLOT_ZERO, is_deletion_mark, item_key, ring_key
from dormant.dynamodb.requests import Item, Table
from dormant.dynamodb.ring import HeadCache, Ring
from dormant.errors import StorageError
from dormant.s3.large_values import LargeValues

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 5


class Deletion:
    """Deletes actors from one table (see the module docstring); `clock`: the store's (the marker commit's `at`)."""

    def __init__(self, table: Table, ring: Ring, heads: HeadCache, values: LargeValues,
                 clock: Callable[[], float]) -> None:
        self.table = table
        self.ring = ring
        self.heads = heads
        self.values = values
        self._now = clock

    async def delete(self, ref: ActorRef, at: float | None = None) -> bool:
        """Delete every item of `ref`'s partition but its deletion mark; True if a live (or half-deleted) actor was
        there. `at` (the runtime's clock) goes into the mark first: from then on no wake-up carrying an older request
        re-creates the actor or stores its message (dormant.runtime.wake)."""
        if at is not None:
            await self._mark_deleted(ref, at)
        for _ in range(MAX_ATTEMPTS):
            ring = await self.ring.items(ref)
            anchor = next((item for item in ring if item["sk"]["S"] == SLOT_ZERO), None)
            if anchor is None:  # no actor: still remove what its partition holds (early messages, leftovers)
                await self._delete_all_but_slot_zero(ref)
                await self.values.delete_actor(ref)
                return False
            if "gone" not in anchor and not await self._mark(ref, ring, anchor):
                continue  # a commit got in first: read again
            await self._delete_all_but_slot_zero(ref)
            await self.values.delete_actor(ref)  # before slot 0: a re-run of an interrupted deletion finds the marker
            incarnation = anchor.get("c", {"S": ""})
            if await self.table.delete(item_key(ref.id, SLOT_ZERO), "attribute_exists(gone) AND c = :c",
                                       {":c": incarnation}):
                log.info("deleted actor %s", ref)
            self.heads.forget(ref)
            return True
        raise StorageError(f"could not delete {ref}: it kept changing under the deletion ({MAX_ATTEMPTS} attempts); "
                           "run the deletion again")

    async def deleted_at(self, ref: ActorRef) -> float | None:
        """When `ref` was last deleted (its mark), None if never: one consistent GetItem."""
        item = await self.table.get(item_key(ref.id, DELETION_MARK))
        return float(item["at"]["N"]) if item is not None else None

    async def _mark(self, ref: ActorRef, ring: list[Item], anchor: Item) -> bool:
        """Steps 1 and 2: the marker commit, then its copy in slot 0. False when another writer won a condition."""
        incarnation = anchor.get("c", {"S": ""})
        ours = [item for item in ring if item.get("c", {"S": ""}) == incarnation]
        size = int(anchor["n"]["N"])
        version = max(int(item["v"]["N"]) for item in ours) + 1
        marker = {**item_key(ref.id, ring_key(version, size)), "v": {"N": str(version)}, "n": {"N": str(size)},
                  "at": {"N": repr(self._now())}, "c": incarnation, "gone": {"BOOL": True}, "snap": {"BOOL": True},
                  "z": {"B": compress({})}}
        if version <= size:
            condition, values = "attribute_not_exists(pk) OR c < :c", {":c": incarnation}
        else:
            condition, values = "v = :previous AND c = :c", {":previous": {"N": str(version - size)},
                                                            ":c": incarnation}
        if not await self.table.put(marker, condition, values):
            return False
        if marker["sk"]["S"] != SLOT_ZERO:
            copy = {**marker, "sk": {"S": SLOT_ZERO}}
            if not await self.table.put(copy, "v = :seen AND c = :c", {":seen": anchor["v"], ":c": incarnation}):
                return False
        return True

    async def _delete_all_but_slot_zero(self, ref: ActorRef) -> None:
        """Step 3, repeated until a fresh read of the partition finds nothing but slot 0 (and the deletion mark)."""
        for _ in range(MAX_ATTEMPTS):
            keys: list[dict[str, Any]] = [
                item_key(ref.id, item["sk"]["S"])
                for item in await self.table.query("pk = :pk", {":pk": {"S": ref.id}}, projection="sk")
                if item["sk"]["S"] != SLOT_ZERO and not is_deletion_mark(item["sk"]["S"])]
            if not keys:
                return
            await self.table.delete_all(keys)
        raise StorageError(f"items of {ref} kept appearing while it was deleted; run the deletion again")

    async def _mark_deleted(self, ref: ActorRef, at: float) -> None:
        """The deletion mark, moved forward only (a slow deleter never moves it back): False from the put means a
        later deletion's mark is there already."""
        await self.table.put({**item_key(ref.id, DELETION_MARK), "at": {"N": repr(at)}},
                             "attribute_not_exists(pk) OR #at < :at", {":at": {"N": repr(at)}}, {"#at": "at"})
