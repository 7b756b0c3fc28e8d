"""The commit ring of one actor: its items read (`Ring`: one Query), the newest version materialized from them (its
snapshot plus the deltas after it), what a commit of a draft on a version stores, and the versions this process
materialized (`HeadCache`). Only `Ring`'s methods make requests."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from dormant.core.records import ActorRef, listed_after
from dormant.core.search import apply_changes
from dormant.dynamodb.items import Head, Side, TornRead, commit_payload, compress
from dormant.dynamodb.keys import RING_PREFIX, SLOT_ZERO, item_key, ring_key
from dormant.dynamodb.requests import Item, Table
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import WorkflowState

RELEASES = "r"  # a commit item's attribute: the S3 objects its version released (dormant.s3.large_values)
DELTA_WEIGHT = "dw"  # a delta item's attribute: the weight of the deltas since the snapshot (runtime.versions)
TOMBSTONED = "tc"  # a snapshot's payload key: [id, consumed at] of the messages its commit tombstoned (Head.tombstoned)


def live_items(items: list[dict[str, Any]]) -> dict[int, dict[str, Any]] | None:
    """The ring's items of the live actor by version; None when there is none (no slot 0, a deletion's marker there,
    or a deletion under way)."""
    anchor = next((item for item in items if item["sk"]["S"] == SLOT_ZERO), None)
    if anchor is None or "gone" in anchor:
        return None
    incarnation = anchor.get("c", {}).get("S", "")
    # Slot 0 is written by the create and never deleted but by a deletion: items of another incarnation
    # are what a wake-up of a deleted actor committed late (dormant.dynamodb.deletion); they are not this actor.
    by_version = {int(item["v"]["N"]): item for item in items if item.get("c", {}).get("S", "") == incarnation}
    if "gone" in by_version[max(by_version)]:  # being deleted (dormant.dynamodb.deletion)
        return None
    return by_version


def materialize(items: list[dict[str, Any]], cached: Callable[[int], Head | None]) -> Head | None:
    """The newest version: its snapshot plus the deltas after it; None when there is no live actor (no slot 0, or a
    deletion's marker there). `cached(version)`: a head already built, taken as it is (its payloads are not parsed
    again: the chain's consumed messages are its `chain_consumed`)."""
    by_version = live_items(items)
    if by_version is None:
        return None
    newest = max(by_version)
    incarnation = by_version[newest].get("c", {}).get("S", "")  # (every live item has it)
    chain: list[dict[str, Any]] = []
    version = newest
    while True:
        item = by_version.get(version)
        if item is None:
            raise TornRead()
        chain.append(item)
        if "snap" in item:
            break
        version -= 1
    known = cached(newest)
    if known is not None and known.incarnation == incarnation:
        return known
    chain.reverse()  # snapshot first
    payloads = [commit_payload(item) for item in chain]
    sides = [Side.from_payload(payload, float(item["at"]["N"])) for item, payload in zip(chain, payloads,
                                                                                            strict=True)]
    head = Head.from_snapshot(int(chain[0]["v"]["N"]), int(chain[0]["n"]["N"]), payloads[0]["f"], sides[0],
                              incarnation)
    head.tombstoned = tuple((str(mid), float(at)) for mid, at in payloads[0].get(TOMBSTONED, ()))  # (none before)
    for item, payload, side in zip(chain[1:], payloads[1:], sides[1:], strict=True):
        head = head.advance(int(item["v"]["N"]), payload, side)
        # (items written before the weight was stored: their compressed size, as those versions decided)
        head.delta_bytes = (int(item[DELTA_WEIGHT]["N"]) if DELTA_WEIGHT in item
                            else head.delta_bytes + len(item["z"]["B"]))
    head.releases = {version: tuple(item[RELEASES]["SS"]) for version, item in by_version.items()
                     if RELEASES in item and version > newest - head.ring}
    return head


def warm_candidate(head: Head) -> bool:
    """Whether two adjacent slots can show that `head` is still its actor's newest version (`confirms`): only once
    its ring has wrapped (every slot then holds a version until a deletion removes it) and when the next version's
    slot follows its own (not slot 0)."""
    return head.version >= head.ring and head.version % head.ring != 0


def confirms(pair: list[Item], head: Head) -> bool:
    """Whether `pair` (Ring.pair) shows that `head` is still the newest version of its actor's life.

    Once a ring has wrapped, a slot is only ever overwritten by a later version of the same life, or deleted by a
    deletion (whose marker is the next version: dormant.dynamodb.deletion). So `head`'s slot holding `head`'s version
    and the next slot holding the version one lap behind the next one means: no later version was committed (it would
    be in the next slot), the actor is not being deleted (its marker would be there, or one of the two deleted), and
    it is the same life (both carry its incarnation)."""
    if len(pair) != 2:
        return False
    own, following = (pair[0], pair[1]) if pair[0]["sk"]["S"] < pair[1]["sk"]["S"] else (pair[1], pair[0])
    incarnation = head.incarnation
    return (own["v"]["N"] == str(head.version) and own.get("c", {}).get("S") == incarnation and "gone" not in own
            and following["v"]["N"] == str(head.version + 1 - head.ring)
            and following.get("c", {}).get("S") == incarnation)


def delta_of(base: Head, draft: CommitDraft, now: float) -> tuple[Side, dict[str, Any]]:
    """What a commit of `draft` on `base` stores: its side work and its delta payload."""
    side = Side(consumed=list(draft.consumed_ids), responses=dict(draft.responses),
                events=[[base.event_seq + i + 1, name, payload, draft.committed_at] for i, (name, payload) in
                        enumerate(draft.events)], at=now, callbacks=list(draft.callbacks))
    delta: dict[str, Any] = {"u": draft.upserts, "x": draft.deleted_prefixes}
    if draft.state is not None:
        delta["s"] = draft.state
    if draft.search and apply_changes(base.search, draft.search) != base.search:  # setting a value again: nothing
        delta["a"] = draft.search
        side.unset = sorted(name for name, value in draft.search.items() if value is None and name in base.search)
    if draft.workflow is not None:
        delta["w"] = draft.workflow.model_dump(mode="json")
        listed = listed_after(WorkflowState(base.listed), draft.workflow.state)
        if listed.value != base.listed:
            side.listed = (listed.value, draft.committed_at)  # the status item follows (dormant.dynamodb.settle)
    return side, delta


def commit_item(ref: ActorRef, head: Head, payload: dict[str, Any], *, snapshot: bool, at: float,
                texts: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """The commit item of `head` in its slot of the ring: its payload compressed (a full snapshot or a delta);
    `texts`: the JSON of some of the payload's members, made already (dormant.dynamodb.items.compress)."""
    item: dict[str, dict[str, Any]] = {
        **item_key(ref.id, ring_key(head.version, head.ring)), "v": {"N": str(head.version)},
        "n": {"N": str(head.ring)}, "at": {"N": repr(at)}, "c": {"S": head.incarnation},
        "z": {"B": compress(payload, texts)}}
    if snapshot:
        item["snap"] = {"BOOL": True}
    return item


class Ring:
    """Reads an actor's ring."""

    def __init__(self, table: Table) -> None:
        self.table = table

    async def items(self, ref: ActorRef) -> list[Item]:
        """Every item of the ring, newest slot first (one strongly consistent Query; more pages only past 1 MB)."""
        return await self.table.query("pk = :pk AND begins_with(sk, :ring)",
                                      {":pk": {"S": ref.id}, ":ring": {"S": RING_PREFIX}}, forward=False)

    async def pair(self, ref: ActorRef, head: Head) -> list[Item]:
        """The slots of `head`'s version and of the one after it (one strongly consistent Query of two adjacent keys:
        `confirms` says whether `head` is still the newest version; `warm_candidate` says when they are adjacent)."""
        return await self.table.query("pk = :pk AND sk BETWEEN :own AND :next", {
            ":pk": {"S": ref.id}, ":own": {"S": ring_key(head.version, head.ring)},
            ":next": {"S": ring_key(head.version + 1, head.ring)}})

    async def slot_zero(self, ref: ActorRef) -> Item | None:
        """Slot 0's key and deletion flag: version 1 (and later 1 + k*N) while the actor exists, a deletion's
        marker while it is deleted."""
        return await self.table.get(item_key(ref.id, SLOT_ZERO), projection="sk, gone")


class HeadCache:
    """The versions this store materialized, per actor and version (least recently used out first): a commit builds
    on the version it read without reading it again."""

    def __init__(self, size: int) -> None:
        self._heads: OrderedDict[tuple[str, int], Head] = OrderedDict()
        self._size = size
        self._top: dict[str, int] = {}  # actor id -> the highest version cached
        # Actors whose last load found a version this store had not cached (another process commits them: a
        # two-slot read would miss, and cost a request more); cleared when a load finds the cached one newest.
        self._scattered: set[str] = set()

    def get(self, ref: ActorRef, version: int) -> Head | None:
        return self._heads.get((ref.id, version))

    def remember(self, ref: ActorRef, head: Head) -> None:
        key = (ref.id, head.version)
        known = self._heads.get(key)
        if known is not None and known.settled:
            head.settled = True
        self._heads[key] = head
        self._heads.move_to_end(key)
        if head.version >= self._top.get(ref.id, 0):
            self._top[ref.id] = head.version
        while len(self._heads) > self._size:
            (actor_id, version), _ = self._heads.popitem(last=False)
            if self._top.get(actor_id) == version:
                del self._top[actor_id]  # (its older versions may stay cached: loads then read the whole ring)
                self._scattered.discard(actor_id)

    def top(self, ref: ActorRef) -> Head | None:
        """The highest version of `ref` this store read or wrote, while it is cached."""
        version = self._top.get(ref.id)
        return None if version is None else self._heads.get((ref.id, version))

    def scattered(self, ref: ActorRef) -> bool:
        return ref.id in self._scattered

    def found(self, ref: ActorRef, known: Head | None, newest: int) -> None:
        """Record what a load of the whole ring found: whether the version this store knew (`known`) was the newest."""
        if known is None or known.version == newest:
            self._scattered.discard(ref.id)
        else:
            self._scattered.add(ref.id)

    def newest(self, ref: ActorRef) -> Head | None:
        """The last version of `ref` this store read or wrote (a commit remembers its version last)."""
        for actor_id, version in reversed(self._heads):
            if actor_id == ref.id:
                return self._heads[(actor_id, version)]
        return None

    def forget(self, ref: ActorRef) -> None:
        for key in [key for key in self._heads if key[0] == ref.id]:
            del self._heads[key]
        self._top.pop(ref.id, None)
        self._scattered.discard(ref.id)
