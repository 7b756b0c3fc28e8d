"""The commit path of the DynamoDB store: creating an actor, loading it (one Query of its ring, or of two of its slots
when this process holds its newest version, and one of its inbox),
committing a version (one conditional PutItem of its slot), and the checks before any of them writes.

One actor's ring of commit slots `c#NNN` holds its versions (every commit is one conditional PutItem on its slot;
every N-th carries a full snapshot, so a load is one Query of the ring: dormant.dynamodb.ring); the items a commit
derives are written after it (dormant.dynamodb.settle); values too big for an item go to S3 first
(dormant.s3.large_values). The layout, and why, is in docs/storage.md.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from dormant.core.limits import draft_sizes
from dormant.core.records import ActorMeta, ActorRef, ActorSnapshot, InboxMessage, listed_status
from dormant.dynamodb.items import (
    Head,
    Measured,
    Parts,
    Side,
    Sized,
    TornRead,
    dumps,
    item_size,
    sized_text,
)
from dormant.dynamodb.messages import InboxItems, Pending
from dormant.dynamodb.requests import Item, Table
from dormant.dynamodb.ring import (
    DELTA_WEIGHT,
    RELEASES,
    TOMBSTONED,
    HeadCache,
    Ring,
    commit_item,
    confirms,
    delta_of,
    materialize,
    warm_candidate,
)
from dormant.dynamodb.settle import Settler
from dormant.dynamodb.sizes import SizeChecks, side_parts_of
from dormant.errors import StorageError, VersionConflict
from dormant.runtime.versions import json_weight, snapshot_due
from dormant.s3.blobs import BlobMissing
from dormant.s3.large_values import LargeValues
from dormant.settings import Settings
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import WorkflowRecord
from dormant.workflow.sizing import json_size as measure  # (the engine's: the same size, faster)

TORN_READ_RETRIES = 5
NULL_BYTES = 4  # JSON's null: a value the delta does not carry, as the weight and the size errors count it


class CommitLog:
    """Creates, loads and commits actors of one table (the EventStore's log: dormant.ports.log).

    `settle_on_load=False` (read-only users such as an API) skips checking, during loads, that the newest
    commit's derived items were written; the actor's next commit still makes sure of it."""

    def __init__(self, table: Table, settings: Settings, *, ring: Ring, heads: HeadCache, messages: InboxItems,
                 settler: Settler, sizes: SizeChecks, values: LargeValues, clock: Callable[[], float],
                 settle_on_load: bool = True) -> None:
        self.table = table
        self.settings = settings
        self.ring = ring
        self.heads = heads
        self.messages = messages
        self.settler = settler
        self.sizes = sizes
        self.values = values
        self._now = clock
        self.settle_on_load = settle_on_load

    async def create(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any], workflow: WorkflowRecord,
                     events: list[tuple[str, Any]], search: dict[str, list[Any]] | None = None) -> bool:
        # Incarnations sort by creation time: a commit of a deleted life never overwrites a later one's items.
        incarnation = f"{time.time_ns():020d}{uuid.uuid4().hex[:8]}"
        state, events = await self.values.store_creation(ref, state, events)
        head, item = self.first_commit(ref, meta, state, workflow, events, incarnation, search or {})
        if not await self.table.put(item, "attribute_not_exists(pk)"):
            return False
        self.heads.remember(ref, head)
        await self.settler.settle(ref, head)
        return True

    async def exists(self, ref: ActorRef) -> bool:
        anchor = await self.ring.slot_zero(ref)
        return anchor is not None and "gone" not in anchor

    async def load(self, ref: ActorRef) -> ActorSnapshot | None:
        problem: Exception | None = None
        for attempt in range(TORN_READ_RETRIES):
            try:
                head, pending = await self._newest(ref)
                if head is None:
                    return None
                inbox, held = self.messages.live(ref, pending, head.hidden())
                # Values kept in S3: a reader of a version a later commit lapped may miss one; it reads again.
                refs = head.all_refs()
                if refs:
                    fetched, inbox = await asyncio.gather(self.values.fetch_all(refs),
                                                          self.values.resolve_inbox(ref, inbox))
                else:  # (no tasks to run side by side: most versions refer to no object)
                    fetched, inbox = {}, await self.values.resolve_inbox(ref, inbox)
                break
            except (TornRead, BlobMissing) as error:
                problem = error
                await asyncio.sleep(0.01 * (attempt + 1))
        else:
            raise StorageError(f"could not read a consistent version of {ref} in {TORN_READ_RETRIES} tries: "
                               f"{problem or 'the commit chain kept changing'}")
        if not head.settled and self.settle_on_load:
            await self.settler.settle(ref, head, probe=True)
        self.heads.remember(ref, head)
        snapshot = head.snapshot(ref, fetched)
        snapshot.inbox = inbox
        snapshot.held_ids = held
        snapshot.wake_error = pending.wake_error
        return snapshot

    async def _newest(self, ref: ActorRef) -> tuple[Head | None, Pending]:
        """The newest version (None: no live actor) and the pending inbox, read side by side.

        A version this store committed or loaded last, once its ring has wrapped, is confirmed by reading two slots
        instead of the whole ring (`Ring.pair`: 1 read unit instead of about 3 for a small actor, and a response
        of two items to parse); when another process committed since, the whole ring is read after all, and the
        actor's next loads read it at once until one finds this store's version newest again (HeadCache.found), so
        an actor whose wake-ups move between processes costs no request more (docs/storage.md, "Loads")."""
        known = self.heads.top(ref)
        if known is not None and warm_candidate(known) and not self.heads.scattered(ref):
            pair, pending = await asyncio.gather(self.ring.pair(ref, known),
                                                 self.messages.pending(ref, dict(known.chain_consumed)))
            if confirms(pair, known):
                return known, pending
            ring_items = await self.ring.items(ref)
        else:
            ring_items, pending = await asyncio.gather(self.ring.items(ref), self.messages.pending(ref))
        head = materialize(ring_items, lambda newest: self.heads.get(ref, newest))
        if head is not None:
            self.heads.found(ref, known, head.version)
        return head, pending

    async def commit(self, ref: ActorRef, expected_version: int, draft: CommitDraft) -> int:
        base = await self._base(ref, expected_version)
        version = expected_version + 1
        now = self._now()
        # big values first (dormant.s3.large_values)
        made = draft
        draft = await self.values.store_draft(ref, base.known_content(), base.all_refs(), version, draft)
        side, delta = delta_of(base, draft, now)
        # Each new value serialized once: its text sizes it, finds its references and goes into the payload.
        texts, measured = _texts(delta)
        head = base.advance(version, delta, side, measured)
        released = self.values.released(base.all_refs(), head.all_refs())
        if released:
            head.releases[version] = released
        side_parts = side_parts_of(side)
        self.sizes.live(ref, head, side, base, side_parts)
        weight = _weight_as_made(made, draft, measured)
        snapshot = snapshot_due(version, base.snapshot_version, base.ring, base.delta_bytes, weight)
        if snapshot:
            payload = {"f": head.full(), **side.payload()}
            if base.chain_consumed:  # the tombstones written below, before this item (Head.tombstoned)
                payload[TOMBSTONED] = [[mid, at] for mid, at in base.chain_consumed]
            head.snapshot_version, head.delta_bytes, head.chain_consumed = version, 0, side.consumed_at()
            head.tombstoned = base.chain_consumed
            parts: Parts = partial(_snapshot_parts, head, side_parts)
            texts = {}  # (its members are the whole version: serialized as one)
        else:
            payload = {**delta, **side.payload()}
            head.delta_bytes = base.delta_bytes + weight
            parts = partial(_delta_parts, draft.upserts, measured, side_parts)  # (named only in a size error)
        item = commit_item(ref, head, payload, snapshot=snapshot, at=now, texts=texts)
        if not snapshot:  # the weight since the snapshot, so that every process decides the next snapshot alike
            item[DELTA_WEIGHT] = {"N": str(head.delta_bytes)}
        if released:  # deleted a lap later, when this slot is overwritten (dormant.s3.large_values)
            item[RELEASES] = {"SS": list(released)}
        if TOMBSTONED in payload and item_size(item) > self.sizes.item_limit:
            # Never the reason a commit fails: without the list, a load must only not race this commit's tombstones.
            del payload[TOMBSTONED]
            head.tombstoned = ()
            item = {**item, "z": commit_item(ref, head, payload, snapshot=True, at=now)["z"]}
        self.sizes.item(ref, f"commit {version}", item, parts)
        incarnation = {":c": {"S": base.incarnation}}
        if version <= base.ring:  # a free slot, or one left by a deleted incarnation of the actor
            condition, values = "attribute_not_exists(pk) OR c < :c", incarnation
        else:  # the slot must still hold the version one lap behind: any later writer got there first
            condition, values = "v = :previous AND c = :c", {":previous": {"N": str(version - base.ring)},
                                                            **incarnation}
        if snapshot and base.chain_consumed:
            # After this commit a load no longer reads the commits that consumed these messages: their
            # tombstones must exist first (already consumed, so writing them early is always right).
            await self.messages.write_tombstones(ref, base.chain_consumed, version)
        if not await self.table.put(item, condition, values):
            raise VersionConflict(f"{ref}: version {expected_version} is no longer current (another commit won)")
        self.heads.remember(ref, head)
        await self.settler.settle(ref, head)
        await self.values.after_commit(ref, version, set(head.all_refs()), _ring_releases(head),
                                       base.releases.get(version - base.ring, ()), lambda: self._pending_texts(ref))
        return version

    # -- the checks before any write (EventStore; dormant.core.limits) ----------------------------------------------
    def check_message(self, ref: ActorRef, message: InboxMessage) -> None:
        message = self.values.check_message(ref, message)  # sized as stored: big values as references
        self.sizes.message_item(ref, self.messages.item(ref, message, order=0), self.messages.parts(message))

    def check_creation(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any],
                       events: list[tuple[str, Any]]) -> None:
        meta, state, events = self.values.check_creation(ref, meta, state, events)
        self.first_commit(ref, meta, state, WorkflowRecord(), events, "0" * 28)

    def check_commit(self, ref: ActorRef, version: int, draft: CommitDraft) -> None:
        made, draft = draft, self.values.check_draft(ref, draft)  # sized as stored; the per-value ceiling
        base = self.heads.get(ref, version)
        if base is None:
            return  # not read here: the commit itself checks before it writes
        side, delta = delta_of(base, draft, draft.committed_at)
        head = base.advance(version + 1, delta, side, _checked_sizes(made, draft, delta))
        self.sizes.live(ref, head, side, base)

    def first_commit(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any], workflow: WorkflowRecord,
                     events: list[tuple[str, Any]], incarnation: str,
                     search: dict[str, Any] | None = None) -> tuple[Head, Item]:
        """Version 1 as a head and its item, checked against the item limit."""
        side = Side(events=[[i + 1, name, payload, meta.created_at] for i, (name, payload) in enumerate(events)],
                    at=self._now(), listed=(listed_status(workflow.state).value, meta.created_at))
        full = {"meta": meta.model_dump(mode="json"), "state": dict(state),
                "workflow": workflow.model_dump(mode="json"), "history": {}, "seq": len(events),
                "search": search or {}, "since": meta.created_at, "listed": listed_status(workflow.state).value}
        head = Head.from_snapshot(1, self.settings.snapshot_every, full, side, incarnation)
        item = commit_item(ref, head, {"f": full, **side.payload()}, snapshot=True, at=side.at)
        self.sizes.item(ref, "the first commit", item, partial(_snapshot_parts, head, side_parts_of(side)))
        self.sizes.live(ref, head, side, None)
        return head, item

    async def _base(self, ref: ActorRef, expected_version: int) -> Head:
        """The materialized version a commit builds on; settled, so nothing of it can be lost."""
        head = self.heads.get(ref, expected_version)
        if head is None:
            snapshot = await self.load(ref)
            head = self.heads.get(ref, expected_version)
            if snapshot is None or head is None:
                found = snapshot.version if snapshot is not None else "no actor"
                raise VersionConflict(f"{ref}: expected version {expected_version}, found {found}")
        if not head.settled:  # loaded without settling (settle_on_load=False)
            await self.settler.settle(ref, head, probe=True)
        return head

    async def _pending_texts(self, ref: ActorRef) -> list[str]:
        """The JSON of every pending inbox item (what the S3 sweep must not take from under it)."""
        return [item["m"]["S"] for item in (await self.messages.pending(ref)).messages]


def _ring_releases(head: Head) -> set[str]:
    """The objects the versions still in the ring released (older versions there may refer to them)."""
    return {key for keys in head.releases.values() for key in keys}


def _texts(delta: dict[str, Any]) -> tuple[dict[str, str], Measured]:
    """The JSON of a delta's new values (its entries, state and workflow record: the payload's members "u", "s", "w")
    and their sizes, from one serialization each."""
    entries = [dumps(entry) for entry in delta["u"]]
    texts = {"u": "[" + ",".join(entries) + "]"}
    measured = Measured([sized_text(text) for text in entries])
    if "s" in delta:
        texts["s"] = dumps(delta["s"])
        measured.state = sized_text(texts["s"])
    if "w" in delta:
        texts["w"] = dumps(delta["w"])
        measured.workflow = sized_text(texts["w"])
    return texts, measured


def _checked_sizes(made: CommitDraft, checked: CommitDraft, delta: dict[str, Any]) -> Measured:
    """The sizes of the delta of `checked` (`made` as it would be stored: LargeValues.check_draft) for the check before
    a commit: the engine's measure of each value kept as made (draft_sizes, the same compact JSON: its test compares
    them), measured here where a value would go to S3. No references: the check's head only counts bytes, and is
    never kept."""
    sizes = draft_sizes(made)
    upserts: list[Sized] = [(size, ()) if kept is entry else (measure(kept), ())
                            for entry, kept, size in zip(made.upserts, checked.upserts, sizes.upserts, strict=True)]
    measured = Measured(upserts)
    if "s" in delta:
        measured.state = (sizes.state if checked.state is made.state else measure(checked.state), ())
    if "w" in delta:
        measured.workflow = (measure(delta["w"]), ())
    return measured


def _snapshot_parts(head: Head, side_parts: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """(what, bytes) of a snapshot commit's parts, for its size error."""
    return head.full_parts() + side_parts


def _delta_parts(upserts: list[dict[str, Any]], measured: Measured,
                 side_parts: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """(what, bytes) of a delta commit's parts, for its size error."""
    parts = [(f"history entry {e['location']!r}", size) for e, (size, _) in zip(upserts, measured.upserts, strict=True)]
    return [*parts, ("state", measured.state[0] if measured.state is not None else NULL_BYTES),
            ("workflow record", measured.workflow[0] if measured.workflow is not None else NULL_BYTES), *side_parts]


def _weight_as_made(made: CommitDraft, stored: CommitDraft, measured: Measured) -> int:
    """dormant.runtime.versions.commit_weight of `made` (the draft as the workflow made it), from the sizes of
    `stored` (its stored form: `measured`) where a value was kept as it was: only the values offloaded to S3 are
    serialized again."""
    weight = sum(size if kept is entry else json_weight(entry)
                 for entry, kept, (size, _) in zip(made.upserts, stored.upserts, measured.upserts, strict=True))
    if stored.state is made.state:
        weight += measured.state[0] if measured.state is not None else NULL_BYTES
    else:
        weight += json_weight(made.state)
    if stored.workflow is made.workflow or made.workflow is None:
        return weight + (measured.workflow[0] if measured.workflow is not None else NULL_BYTES)
    return weight + json_weight(made.workflow.model_dump(mode="json"))
