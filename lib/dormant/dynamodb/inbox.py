"""A running wake-up's look at its inbox while it waits in process for a message (EventStore.wait_inbox).

DynamoDB has no change notification the wake-up could wait on, so it polls the `pending` index: one
strongly consistent Query per look, every INBOX_POLL seconds, only while an in-process queue wait lasts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

from dormant.dynamodb.items import Head, Side
from dormant.ports import ActorRef, InboxMessage

if TYPE_CHECKING:
    from dormant.dynamodb.store import DynamoEventStore

INBOX_POLL = 0.05  # seconds between looks


async def wait_inbox(store: DynamoEventStore, ref: ActorRef, known: AbstractSet[str],
                     timeout: float) -> list[InboxMessage]:
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout
    while True:
        pending = [item for item in await store._query_pending(ref) if "m" in item]
        head = _newest_head(store, ref)
        if head is None:  # never read through this store: a load knows the commit chain
            snapshot = await store.load(ref)
            inbox = snapshot.inbox if snapshot is not None else []
        else:  # consumed messages not tombstoned yet are those of the chain since the last snapshot
            inbox = store._live_inbox(ref, pending, [Side(consumed=list(head.chain_consumed), at=head.side.at)])
        fresh = await store.values.resolve_inbox(ref, [message for message in inbox if message.id not in known],
                                                 whole=False)
        remaining = give_up - loop.time()
        if fresh or remaining <= 0:
            return fresh
        await asyncio.sleep(min(INBOX_POLL, remaining))


def _newest_head(store: DynamoEventStore, ref: ActorRef) -> Head | None:
    """The last version of `ref` the store read or wrote (a commit remembers its version last)."""
    for actor_id, version in reversed(store._cache):
        if actor_id == ref.id:
            return store._cache[(actor_id, version)]
    return None
