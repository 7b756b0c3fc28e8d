"""Settling a version: the items a commit's side work derives — responses and events, the status item, search items,
callback lookup items — written after its commit item, which carries everything they are made from.

A commit settles its own version before returning, and a commit needs its base settled, so only the newest version can
be unsettled (a crash right after its commit): whoever loads it next finishes the job, first probing which of them
exist (one BatchGetItem) to write only the missing ones. Every write is idempotent or conditional, so settling again
changes nothing.
"""

from __future__ import annotations

import logging

from dormant.core.records import ActorRef
from dormant.dynamodb.callbacks import CallbackItems
from dormant.dynamodb.items import Head
from dormant.dynamodb.keys import STATUS_SK, item_key
from dormant.dynamodb.listing import StatusItems
from dormant.dynamodb.outputs import OutputItems
from dormant.dynamodb.requests import Table
from dormant.dynamodb.search import SearchItems, sort_keys

log = logging.getLogger("dormant.dynamodb.store")  # the store's logger, as before settling had a module


class Settler:
    """Writes the derived items of a version (see the module docstring)."""

    def __init__(self, table: Table, outputs: OutputItems, status: StatusItems, search: SearchItems,
                 callbacks: CallbackItems) -> None:
        self.table = table
        self.outputs = outputs
        self.status = status
        self.search = search
        self.callbacks = callbacks

    async def settle(self, ref: ActorRef, head: Head, *, probe: bool = False) -> None:
        """Write `head`'s derived items; `probe`: first read which of them exist, to write only the missing ones."""
        side = head.side
        derived = self.outputs.items_of(ref, head)
        keys = [item["sk"]["S"] for item in derived] + ([STATUS_SK] if side.listed else []) + sort_keys(head)
        found = await self._present(ref, keys, head.version) if probe and keys else set()
        derived = [item for item in derived if item["sk"]["S"] not in found]
        if derived:
            await self.table.put_all(derived)
        listed = side.listed is not None and STATUS_SK not in found
        if side.listed is not None and listed:
            await self.status.put(ref, status=side.listed[0], since=side.listed[1], version=head.version,
                                  created_at=float(head.meta["created_at"]), incarnation=head.incarnation)
        searched = await self.search.settle(ref, head, found)
        await self.callbacks.write(ref, head)
        if probe and (derived or listed or searched):
            log.info("settled version %d of %s: re-wrote its derived item(s)", head.version, ref)
        head.settled = True

    async def _present(self, ref: ActorRef, sort_keys: list[str], version: int) -> set[str]:
        """Which of these items of the actor's partition exist, written for `version` (their `v`)."""
        items = await self.table.get_all([item_key(ref.id, key) for key in sort_keys], "sk, v")
        return {item["sk"]["S"] for item in items if int(item["v"]["N"]) == version}
