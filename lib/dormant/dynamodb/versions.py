"""The versions of an actor that its commit ring still holds (dormant.runtime.versions says which, and why):
every version from the oldest snapshot in the ring to the newest, rebuilt from one Query of the ring, with the
values a version keeps in S3 read back when one is loaded. Nothing is written here."""

from __future__ import annotations

import asyncio
from typing import Any

from dormant.core.records import ActorRef, ActorSnapshot, VersionInfo
from dormant.dynamodb.items import Head, Side, TornRead, commit_payload
from dormant.dynamodb.ring import Ring, live_items
from dormant.errors import StorageError
from dormant.runtime.versions import Materialized, describe, not_retained
from dormant.s3.blobs import BlobMissing
from dormant.s3.large_values import LargeValues

_RETRIES = 5  # reads of a ring that a commit changed meanwhile (as loads make)


class KeptVersions:
    """Reads the kept versions of one table's actors."""

    def __init__(self, ring: Ring, values: LargeValues) -> None:
        self.ring = ring
        self.values = values

    async def retained_versions(self, ref: ActorRef) -> list[VersionInfo] | None:
        """What each kept version is (EventStore.retained_versions): one Query of the ring."""
        for attempt in range(_RETRIES):
            try:
                heads = kept_heads(await self.ring.items(ref))
            except TornRead:
                await asyncio.sleep(0.01 * (attempt + 1))
                continue
            return None if heads is None else describe([_materialized(head, side) for head, side in heads])
        raise StorageError(f"could not read a consistent ring of {ref} in {_RETRIES} tries")

    async def load_version(self, ref: ActorRef, version: int) -> ActorSnapshot | None:
        """Kept version `version`, its S3 values read back (EventStore.load_version): one Query of the ring, and a GET
        per object it refers to that this process has not cached."""
        problem: Exception | None = None
        for attempt in range(_RETRIES):
            try:
                heads = kept_heads(await self.ring.items(ref))
                if heads is None:
                    return None
                found = next((head for head, _ in heads if head.version == version), None)
                if found is None:
                    raise not_retained(version, [_materialized(head, side) for head, side in heads])
                # An object of an old version is deleted a ring lap after a later one released it: a reader that
                # misses one reads the ring again, and finds the version no longer kept.
                return found.snapshot(ref, await self.values.fetch_all(found.all_refs()))
            except (TornRead, BlobMissing) as error:
                problem = error
                await asyncio.sleep(0.01 * (attempt + 1))
        raise StorageError(f"could not read a consistent version {version} of {ref} in {_RETRIES} tries: {problem}")


def kept_heads(items: list[dict[str, Any]]) -> list[tuple[Head, Side]] | None:
    """Every version the ring's items can rebuild, oldest first, with its commit's side work; None when there is no
    live actor. TornRead when a commit overwrote slots while the Query read them (read again)."""
    by_version = live_items(items)
    if by_version is None:
        return None
    newest = max(by_version)
    incarnation = by_version[newest].get("c", {}).get("S", "")  # (every live item has it)
    oldest = newest
    while oldest - 1 in by_version:
        oldest -= 1
    start = next((version for version in range(oldest, newest + 1) if "snap" in by_version[version]), None)
    if start is None:
        raise TornRead()
    kept: list[tuple[Head, Side]] = []
    head: Head | None = None
    for version in range(start, newest + 1):
        item = by_version[version]
        payload = commit_payload(item)
        side = Side.from_payload(payload, float(item["at"]["N"]))
        if head is None or "snap" in item:
            head = Head.from_snapshot(version, int(item["n"]["N"]), payload["f"], side, incarnation)
        else:
            head = head.advance(version, payload, side)
        kept.append((head, side))
    return kept


def _materialized(head: Head, side: Side) -> Materialized:
    return Materialized(head.version, side.at, head.meta, head.state, head.workflow, head.history,
                        len(side.consumed), head.search)
